// Preloaded (LD_PRELOAD) into the processes bench/instructions.sh runs under valgrind 3.19, Debian 12's.
//
// valgrind's wrapper of rt_sigsuspend takes its own signal out of the caller's mask in place
// (coregrind/m_syswrap/syswrap-linux.c, PRE(sys_rt_sigsuspend): VG_(sigdelset) on the caller's
// pointer). libdispatch's main thread, where a Swift async main parks, passes a mask it declares
// `static const` (`_dispatch_sigsuspend`), so valgrind writes to read-only memory and stops with
// "Valgrind received a signal 11". This sigsuspend passes a copy on the stack; what the kernel is
// asked for is the same.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
