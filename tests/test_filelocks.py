"""Embedded resource locks (engine/filelocks.py): one holder across
threads and processes, descriptors kept open without losing a lock."""

import os
import subprocess
import sys
import threading

from converge.engine import filelocks


def test_a_held_lock_keeps_out_other_holders_until_released(tmp_path):
    # two FileLocks open the file apart, as two processes do
    one, two = (filelocks.FileLocks(str(tmp_path)) for _ in range(2))
    lock = one.get_lock(b'converge-res-abc')
    assert lock.acquire(blocking=False)
    assert not two.get_lock(b'converge-res-abc').acquire(blocking=False)
    assert not two.get_lock(b'converge-res-abc').acquire(blocking=0.05)
    # another name is another lock
    other = two.get_lock(b'converge-res-def')
    assert other.acquire(blocking=False)
    other.release()
    lock.release()
    again = two.get_lock(b'converge-res-abc')
    assert again.acquire(blocking=False)
    again.release()


def test_threads_of_one_process_take_turns(tmp_path):
    locks = filelocks.FileLocks(str(tmp_path))
    lock = locks.get_lock('converge-res-x')
    assert lock.acquire()
    got = []

    def take():
        got.append(locks.get_lock('converge-res-x').acquire(blocking=5))

    th = threading.Thread(target=take)
    th.start()
    th.join(0.2)
    assert got == []          # still waiting while this thread holds it
    lock.release()
    th.join(10)
    assert got == [True]


def test_another_process_cannot_take_a_held_lock(tmp_path):
    locks = filelocks.FileLocks(str(tmp_path))
    lock = locks.get_lock('converge-res-y')
    assert lock.acquire()
    probe = ('import sys; from converge.engine import filelocks; '
             'l = filelocks.FileLocks(sys.argv[1])'
             '.get_lock("converge-res-y"); '
             'print(l.acquire(blocking=False))')
    run = [sys.executable, '-c', probe, str(tmp_path)]
    assert subprocess.check_output(run, text=True).strip() == 'False'
    lock.release()
    assert subprocess.check_output(run, text=True).strip() == 'True'


def test_idle_descriptors_are_closed_but_held_locks_stay_held(
        tmp_path, monkeypatch):
    monkeypatch.setattr(filelocks, 'KEEP_OPEN', 3)
    locks = filelocks.FileLocks(str(tmp_path))
    held = locks.get_lock('converge-res-held')
    assert held.acquire()
    for i in range(20):
        lk = locks.get_lock('converge-res-%d' % i)
        assert lk.acquire(blocking=False)
        lk.release()
    assert len(locks._entries) <= 3
    others = filelocks.FileLocks(str(tmp_path))
    assert not others.get_lock('converge-res-held').acquire(blocking=False)
    held.release()
    assert others.get_lock('converge-res-held').acquire(blocking=False)
    open_fds = len(os.listdir('/proc/self/fd'))
    locks.close()
    assert len(os.listdir('/proc/self/fd')) < open_fds
