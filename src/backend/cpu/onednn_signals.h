// Running oneDNN's JIT kernels with asynchronous signals held back. oneDNN 2.6's JIT kernels keep data
// below the stack pointer, past the 128 bytes the x86-64 ABI leaves to a function there; a signal
// handler run on a thread in the middle of one (Ctrl-C reaching Python's handler) writes its frame
// over that data, and the kernel then corrupts the heap. So the thread that calls oneDNN blocks the
// asynchronous signals for the call, and the OpenMP workers that run oneDNN's parallel kernels block
// them for good (a process-directed signal then goes to a thread outside any kernel, or waits until
// the call returns).
#pragma once

#include <omp.h>
#include <pthread.h>

#include <csignal>

namespace rtx::cpu {

// Every signal but those the code itself raises (faults, traps).
inline sigset_t async_signals() {
  sigset_t set;
  sigfillset(&set);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&set, s);
  return set;
}

// Blocks the asynchronous signals of the calling thread for a scope; one that arrives meanwhile is
// delivered at the end.
class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked() {
    const sigset_t set = async_signals();
    pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  ~AsyncSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

// Blocks the asynchronous signals of every OpenMP worker thread (not the calling thread), once per
// thread: call it outside a parallel region, before oneDNN runs a parallel kernel.
inline void block_async_signals_in_omp_workers() {
  static thread_local bool blocked = false;  // per worker: whether its mask is set
  if (omp_in_parallel()) return;
#pragma omp parallel
  {
    if (omp_get_thread_num() != 0 && !blocked) {
      const sigset_t set = async_signals();
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      blocked = true;
    }
  }
}

}  // namespace rtx::cpu
