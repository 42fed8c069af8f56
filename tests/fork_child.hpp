// tests/fork_child.hpp -- run part of a test in a forked child process: for planted mistakes that the SIMT layer
// stops with "simt: error" (an abort, which would end the whole test binary). The child's stdout and stderr
// are captured; its expected abort leaves no core file and no doctest crash report. (tests/simt/child_process.hpp
// starts a fresh copy of the binary instead, for scenarios that need a clean process or another environment.)
#pragma once
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

namespace ladder::test {

struct Child {
  int signal = 0;    // the signal that ended it (0: none)
  int code = -1;     // its exit code (-1: it did not exit)
  std::string text;  // what it printed, stdout and stderr interleaved
};

// Runs body() in a child; body's return value is the child's exit code.
template <class F>
Child in_child(F body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);  // nothing buffered in the parent is printed twice
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    std::signal(SIGABRT, SIG_DFL);  // the abort ends the child; the parent reads how it died
    _exit(body());
  }
  close(fds[1]);
  Child c;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) c.text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) c.signal = WTERMSIG(status);
  if (WIFEXITED(status)) c.code = WEXITSTATUS(status);
  return c;
}

}  // namespace ladder::test
