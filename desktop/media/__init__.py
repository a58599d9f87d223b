"""Media devices: speaker, microphone and camera, each with a fake on a virtual clock.

At exit, one garbage collection runs before the interpreter tears its modules down: a soxr
resampler caught in a reference cycle (a call and its listeners, say) is then freed, instead of
making nanobind print "leaked" lines as the soxr module goes away with it still alive."""

import atexit
import gc

atexit.register(gc.collect)
