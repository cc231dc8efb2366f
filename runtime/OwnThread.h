//===- OwnThread.h - the runtime's threads of its own -----------*- C++ -*-===//
//
// The runtime's few threads besides the main one (the input thread, the
// background collectives') start the same way: with every signal blocked, so
// that a stop or a kill reaches the main thread, and named, so that a
// debugger or `top -H` shows what each is.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_OWNTHREAD_H
#define CLEAVE_RUNTIME_OWNTHREAD_H

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace cleave::rt {

/// A thread running `body`, named `name` (at most 15 characters), with
/// every signal blocked.
template <typename Body> std::thread startOwnThread(const char *name, Body &&body) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  std::thread thread(std::forward<Body>(body));
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_setname_np(thread.native_handle(), name);
  return thread;
}

} // namespace cleave::rt

#endif
