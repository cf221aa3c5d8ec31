/* Windows builds only: pclose() and system() return the child's exit code itself. */
#ifndef BRASA_WIN32_SYS_WAIT_H
#define BRASA_WIN32_SYS_WAIT_H
#define WIFEXITED(s) 1
#define WEXITSTATUS(s) (s)
#define WIFSIGNALED(s) 0
#define WTERMSIG(s) 0
#endif
