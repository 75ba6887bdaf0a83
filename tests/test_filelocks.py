"""Embedded resource locks (coordination/filelocks.py): one holder across
threads and processes, every lock a byte of one file."""

import os
import subprocess
import sys
import threading

from converge.coordination import filelocks


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
    probe = ('import sys; from converge.coordination import filelocks; '
             'l = filelocks.FileLocks(sys.argv[1])'
             '.get_lock("converge-res-y"); '
             'print(l.acquire(blocking=False))')
    run = [sys.executable, '-c', probe, str(tmp_path)]
    assert subprocess.check_output(run, text=True).strip() == 'False'
    lock.release()
    assert subprocess.check_output(run, text=True).strip() == 'True'


def test_any_number_of_locks_live_in_one_file_and_leave_nothing_behind(
        tmp_path):
    locks = filelocks.FileLocks(str(tmp_path))
    held = locks.get_lock('converge-res-held')
    assert held.acquire()
    for i in range(200):
        lk = locks.get_lock('converge-res-%d' % i)
        assert lk.acquire(blocking=False)
        lk.release()
    # no file per lock, and no state kept for a lock nobody holds
    assert os.listdir(str(tmp_path)) == [filelocks.FILE]
    assert list(locks._entries) == ['converge-res-held']
    others = filelocks.FileLocks(str(tmp_path))
    assert not others.get_lock('converge-res-held').acquire(blocking=False)
    held.release()
    again = others.get_lock('converge-res-held')
    assert again.acquire(blocking=False)
    # closing drops what it holds, as the end of its process would
    others.close()
    assert locks.get_lock('converge-res-held').acquire(blocking=False)


def test_a_wait_that_gives_up_leaves_the_lock_to_the_next(tmp_path):
    one, two = (filelocks.FileLocks(str(tmp_path)) for _ in range(2))
    lock = one.get_lock('converge-res-z')
    assert lock.acquire()
    assert not two.get_lock('converge-res-z').acquire(blocking=0.02)
    assert not two._entries        # nothing left of the wait
    lock.release()
    assert two.get_lock('converge-res-z').acquire(blocking=False)
