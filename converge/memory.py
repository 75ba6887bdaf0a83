"""Memory housekeeping for big stacks."""

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector paused for a burst that makes many
    objects which all live on (a 22,000-resource definition, an update's
    layout): its collections would find nothing and cost half the
    burst's time (measured: a no-op update of 22,010 resources starts in
    2.5-3.0 s with it, 1.3 s without). Reference counting still frees
    what dies; the collector resumes after, and sees every object."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: glibc's mallopt parameter: the size from which a block is mapped on its
#: own (and unmapped when freed)
_M_MMAP_THRESHOLD = -3


def return_large_blocks(size=1024 * 1024):
    """Give blocks of `size` bytes and more back to the system when they
    are freed (glibc only; elsewhere nothing changes).

    glibc maps large blocks on their own and unmaps them when freed, but
    raises that threshold (up to 32 MB) each time one is freed: after
    that, a service handling a few values of megabytes (a template's
    functions' results, a listing's answer) keeps them in its heap,
    fragmented, and never gives the memory back. Fixing the threshold
    keeps converge-api's size that of what it holds now: measured, a
    stack of 4 MB values took it to 344 MB and left it at 317 MB; with
    it, 243 MB at most and 148 MB after."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library('c')
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, size))
