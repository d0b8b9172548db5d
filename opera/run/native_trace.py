"""Where in native code a worker died: the faulting library and offset of a fatal signal.

A worker that dies on SIGSEGV / SIGFPE / SIGBUS / SIGILL / SIGABRT leaves no Python traceback, so
its test was signed by operator and signal alone (``native-crash:ov-torch:torch.eye:SIGSEGV``):
one plugin defect reached by six operators became six root causes (the CPU ``Gather`` SIGFPE on
an empty output, judged six times in the fifth session). Here the worker installs a small signal
handler (C, compiled once per machine with the system's C compiler and cached) that writes the
native backtrace, each frame as (shared object, offset from its load base, exported symbol when
the address lies inside one), to a file the parent reads after the death. The first frame outside
the C and C++ runtimes names the code that faulted: ``libopenvino_intel_cpu_plugin.so+0x3a5f10``.

The handler writes with ``write(2)`` only, resolves frames with ``dladdr1`` (no allocation), arms a
5 s ``alarm`` in case the loader's lock is held by the crashed thread, then restores the previous
disposition and raises the signal again, so the process dies exactly as it would have (the parent
still reads the signal from the exit code). Without a C compiler nothing is installed and deaths
are reported as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NativeFrame", "NativeTrace", "helper_library", "install", "read_trace"]

_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int out_fd = -1;
static volatile sig_atomic_t fired = 0;
static const int sigs[5] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
static struct sigaction previous[5];
static char alt_stack[1 << 16];

static void put(const char *s) { if (s) { ssize_t r = write(out_fd, s, strlen(s)); (void)r; } }
static void put_hex(uintptr_t v) {
    char buf[24]; int i = 23; buf[i] = 0;
    do { buf[--i] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    buf[--i] = 'x'; buf[--i] = '0'; put(buf + i);
}
static void put_dec(int v) {
    char buf[16]; int i = 15; buf[i] = 0;
    do { buf[--i] = (char)('0' + v % 10); v /= 10; } while (v);
    put(buf + i);
}

static void handler(int sig, siginfo_t *info, void *ctx) {
    (void)info; (void)ctx;
    if (!fired && out_fd >= 0) {
        fired = 1;
        alarm(5);
        put("signal\t"); put_dec(sig); put("\n");
        void *frames[64];
        int n = backtrace(frames, 64);
        for (int i = 0; i < n; i++) {
            Dl_info dl; const ElfW(Sym) *sym = NULL;
            uintptr_t pc = (uintptr_t)frames[i];
            put("frame\t");
            if (dladdr1(frames[i], &dl, (void **)&sym, RTLD_DL_SYMENT) && dl.dli_fname) {
                put(dl.dli_fname); put("\t"); put_hex(pc - (uintptr_t)dl.dli_fbase); put("\t");
                if (dl.dli_sname && sym && pc >= (uintptr_t)dl.dli_saddr && pc < (uintptr_t)dl.dli_saddr + sym->st_size)
                    put(dl.dli_sname);
            } else {
                put("?\t"); put_hex(pc); put("\t");
            }
            put("\n");
        }
        put("end\n");
    }
    for (int i = 0; i < 5; i++)
        if (sigs[i] == sig) sigaction(sig, &previous[i], NULL);
    raise(sig);  /* blocked until the handler returns, then taken by the previous disposition */
}

int opera_trace_install(const char *path) {
    if (out_fd < 0) {
        out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out_fd < 0) return -1;
        void *warm[2];
        backtrace(warm, 2);  /* loads the unwinder now, not inside the handler */
        stack_t ss; ss.ss_sp = alt_stack; ss.ss_size = sizeof alt_stack; ss.ss_flags = 0;
        sigaltstack(&ss, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 5; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], &sa, &old) == 0 && old.sa_sigaction != handler) previous[i] = old;
    }
    return 0;
}
"""

# frames of these objects are the machinery around a fault, not its place: the C and C++ runtimes
# (raise, abort, std::terminate, memcpy), the unwinder, the loader, this handler
_RUNTIME = (
    "libc.so",
    "libc-",
    "libpthread",
    "ld-linux",
    "libstdc++",
    "libgcc_s",
    "linux-vdso",
    "opera-native-trace",
)
_loaded: ctypes.CDLL | None = None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opera"


def helper_library(cache_dir: Path | None = None) -> Path | None:
    """The compiled handler (built on first use, then cached by its source's hash); None when no
    C compiler is at hand or it fails."""
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    where = (cache_dir or _cache_dir()) / f"opera-native-trace-{digest}.so"
    if where.exists():
        return where
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=where.parent) as tmp:
            src = Path(tmp) / "trace.c"
            src.write_text(_SOURCE)
            out = Path(tmp) / where.name
            subprocess.run(
                [compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)],
                check=True,
                capture_output=True,
                timeout=120,
            )
            os.replace(out, where)  # atomic: two workers building at once both end with one file
    except (OSError, subprocess.SubprocessError):
        return None
    return where


def install(report_path: str) -> bool:
    """In a worker: write the backtrace of a fatal signal to ``report_path`` (truncated now).
    Calling it again re-arms the handler (a framework imported since may have replaced it)."""
    global _loaded
    if _loaded is None:
        lib = helper_library()
        if lib is None:
            return False
        try:
            _loaded = ctypes.CDLL(str(lib))
        except OSError:
            return False
    return int(_loaded.opera_trace_install(report_path.encode())) == 0


@dataclass(frozen=True)
class NativeFrame:
    path: str
    offset: int
    symbol: str = ""

    @property
    def text(self) -> str:
        where = f"{os.path.basename(self.path)}+{self.offset:#x}"
        return f"{where} ({_demangle(self.symbol)})" if self.symbol else where


@dataclass(frozen=True)
class NativeTrace:
    signal: int
    frames: tuple[NativeFrame, ...]

    @property
    def culprit(self) -> NativeFrame | None:
        """The first frame outside the runtimes: the code that faulted (or called abort)."""
        for frame in self.frames:
            name = os.path.basename(frame.path)
            if frame.path != "?" and not name.startswith(_RUNTIME):
                return frame
        return None

    def summary(self, depth: int = 3) -> str:
        """``at libX.so+0x1f2e (symbol) < libY.so+0x88 < ...``: the culprit and its callers."""
        culprit = self.culprit
        if culprit is None:
            return ""
        start = self.frames.index(culprit)
        return "at " + " < ".join(f.text for f in self.frames[start : start + depth])


def read_trace(report_path: str | os.PathLike[str]) -> NativeTrace | None:
    """What a dead worker's handler wrote; None when it wrote nothing (no fatal signal, or no
    handler)."""
    try:
        text = Path(report_path).read_text(errors="replace")
    except OSError:
        return None
    sig, frames = 0, []
    for line in text.splitlines():
        parts = line.split("\t")
        if parts[0] == "signal" and len(parts) > 1 and parts[1].isdigit():
            sig = int(parts[1])
        elif parts[0] == "frame" and len(parts) >= 3:
            with contextlib.suppress(ValueError):
                frames.append(NativeFrame(parts[1], int(parts[2], 16), parts[3] if len(parts) > 3 else ""))
    return NativeTrace(sig, tuple(frames)) if sig else None


@functools.cache
def _demangle(symbol: str) -> str:
    if not symbol.startswith("_Z") or not sys.platform.startswith("linux"):
        return symbol
    try:
        cxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return symbol
    demangle = cxx.__cxa_demangle
    demangle.restype = ctypes.c_void_p
    demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int()
    ptr = demangle(symbol.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return symbol
    try:
        return str(ctypes.string_at(ptr).decode(errors="replace"))[:200]
    finally:
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free(ptr)
