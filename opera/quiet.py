"""Keep the native start-up chatter of the DL libraries out of Opera's own output.

TensorFlow (through TFLite, the Keras template and OpenVINO's TensorFlow frontend) writes log lines
from C++ to file descriptor 2 when it is first imported, before absl's logging is set up, so
``TF_CPP_MIN_LOG_LEVEL`` cannot silence them ("All log messages before absl::InitializeLog() ...",
"oneDNN custom operations are on ..."). ``quiet_native_logs`` captures descriptor 2 around a block
(an import, a probe of the targets) and writes back every line that is not such chatter, so real
warnings and errors still reach the user.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["NATIVE_NOISE", "quiet_native_logs"]

# Lines dropped: absl's pre-initialization notice, and informational (I...) / warning (W...) lines
# of TensorFlow's C++ start-up that say nothing about Opera's work.
NATIVE_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:.]+\s+\d+ (port|cpu_feature_guard|cuda_\w+|tf_\w+)\.cc:\d+\].*"
    r"|.*This TensorFlow binary is optimized to use available CPU instructions.*"
    r"|.*To enable the following instructions: .* in other operations, rebuild TensorFlow.*)$"
)


@contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Run the block with descriptor 2 captured; afterwards write back the lines that are not noise."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable descriptor 2 (embedded interpreters): nothing to do
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with suppress(ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [
                line
                for line in capture.read().decode(errors="replace").splitlines(keepends=True)
                if not NATIVE_NOISE.match(line.rstrip("\r\n"))
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
