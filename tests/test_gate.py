"""The gate: how many worker threads run engine code at once."""

import threading

from converge.engine import gate as gate_mod


def _run_inside(gate, n, body):
    """n threads each run body() inside gate.held(); returns the most that
    were inside at once."""
    inside = [0]
    most = [0]
    lock = threading.Lock()
    start = threading.Barrier(n)

    def work():
        start.wait()
        with gate.held():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            body()
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    return most[0]


def test_one_thread_at_a_time_runs_engine_code():
    gate = gate_mod.Gate(1)
    # each thread lets the others try to come in while it is inside
    assert _run_inside(gate, 4, lambda: threading.Event().wait(0.01)) == 1


def test_no_gate_lets_every_thread_in():
    gate = gate_mod.Gate(0)
    everyone = threading.Barrier(4)
    # all four must be inside together, or the barrier breaks
    assert _run_inside(gate, 4, lambda: everyone.wait(10)) == 4


def test_a_thread_waiting_on_the_cloud_lets_another_in():
    gate = gate_mod.Gate(1)
    both_waiting = threading.Barrier(3)

    def body():
        with gate.released():
            both_waiting.wait(10)  # both are waiting on "the cloud" at once

    results = []

    def work():
        with gate.held():
            body()
            results.append(1)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for th in threads:
        th.start()
    both_waiting.wait(10)
    for th in threads:
        th.join(10)
    assert results == [1, 1]


def test_held_is_reentrant_in_one_thread():
    gate = gate_mod.Gate(1)
    with gate.held():
        with gate.held():
            pass
    # and the gate is free again afterwards
    assert _run_inside(gate, 2, lambda: None) == 1


def _until(predicate, what):
    for _ in range(10000):
        if predicate():
            return
        threading.Event().wait(0.001)
    raise AssertionError('never: %s' % what)


def test_a_freed_place_goes_to_the_thread_that_waited_longest():
    # a thread that leaves the gate and comes straight back (a unit of
    # work letting go around a cloud call, or the next unit) queues behind
    # the one already waiting, instead of taking the place again at once
    gate = gate_mod.Gate(1)
    order = []
    with gate.held():
        waiter = threading.Thread(
            target=lambda: gate.held().__enter__() or order.append('waiter')
            or gate._leave())
        waiter.start()
        _until(lambda: gate.queued == 1, 'the waiter queues')
        with gate.released():
            pass
        order.append('came back')
    waiter.join(10)
    assert order == ['waiter', 'came back']


def test_a_thread_interrupted_at_the_gate_loses_no_place():
    # Ctrl-C while waiting at the gate: the place the waiter was queued
    # for must go to the next thread, not to nobody (a gate that lets no
    # thread in again is an engine that stops)
    import signal
    gate = gate_mod.Gate(1)
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with gate.held():
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(10)
    main = threading.main_thread().ident

    def interrupt():
        _until(lambda: gate.queued == 1, 'the main thread queues')
        signal.pthread_kill(main, signal.SIGINT)

    # Python's own Ctrl-C, whatever an earlier test of this process left
    # (a command or an agent run in-process installs handlers of its own)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt).start()
    try:
        with gate.held():
            raise AssertionError('let in while the holder was inside')
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    assert gate.queued == 0
    leave.set()
    holder.join(10)
    assert _run_inside(gate, 2, lambda: None) == 1
