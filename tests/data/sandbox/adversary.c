/* What a hostile candidate would try, one attack per command. tests/unit/sandbox_attack_test.cpp
 * compiles it and runs it inside the sandbox (and, as a control, outside). Each attempt prints
 * one line "<attempt> <target>: ok ..." or "<attempt> <target>: denied <errno name>". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char* attempt, const char* target, int ok, int err) {
  if (ok) {
    printf("%s %s: ok\n", attempt, target);
  } else {
    printf("%s %s: denied %s\n", attempt, target, strerrorname_np(err));
  }
  fflush(stdout);
}

/* connect HOST PORT */
static int do_connect(const char* host, const char* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    report("connect", host, 0, errno);
    return 0;
  }
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)atoi(port));
  inet_pton(AF_INET, host, &addr.sin_addr);
  const int rc = connect(fd, (struct sockaddr*)&addr, sizeof addr);
  report("connect", host, rc == 0, errno);
  if (rc == 0) {
    const char msg[] = "stolen\n";
    (void)!write(fd, msg, sizeof msg - 1);
  }
  close(fd);
  return 0;
}

/* read PATH...: files are read, folders listed */
static int do_read(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    DIR* dir = opendir(argv[i]);
    if (dir != NULL) {
      int entries = 0;
      while (readdir(dir) != NULL) {
        ++entries;
      }
      closedir(dir);
      printf("read %s: ok folder of %d entries\n", argv[i], entries);
      continue;
    }
    const int fd = open(argv[i], O_RDONLY);
    if (fd < 0) {
      report("read", argv[i], 0, errno);
      continue;
    }
    char buffer[256];
    const ssize_t n = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (n < 0) {
      report("read", argv[i], 0, errno);
      continue;
    }
    buffer[n] = '\0';
    for (ssize_t k = 0; k < n; ++k) {
      if (buffer[k] == '\n') {
        buffer[k] = ' ';
      }
    }
    printf("read %s: ok %s\n", argv[i], buffer);
  }
  return 0;
}

/* write PATH... */
static int do_write(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const int fd = open(argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      report("write", argv[i], 0, errno);
      continue;
    }
    const char msg[] = "written by the adversary\n";
    const ssize_t n = write(fd, msg, sizeof msg - 1);
    const int err = errno;
    close(fd);
    report("write", argv[i], n == (ssize_t)(sizeof msg - 1), err);
  }
  return 0;
}

/* env NAME...: variables, then a search for VALUE in every readable /proc/<pid>/environ */
static int do_env(int argc, char** argv) {
  const char* marker = argv[0];
  for (int i = 1; i < argc; ++i) {
    const char* value = getenv(argv[i]);
    printf("env %s: %s\n", argv[i], value ? value : "(absent)");
  }
  DIR* proc = opendir("/proc");
  int found = 0;
  struct dirent* e;
  while (proc != NULL && (e = readdir(proc)) != NULL) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
    const int fd = open(path, O_RDONLY);
    if (fd < 0) {
      continue;
    }
    static char buffer[1 << 20];
    const ssize_t n = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (n > 0 && memmem(buffer, (size_t)n, marker, strlen(marker)) != NULL) {
      printf("marker in %s\n", path);
      found = 1;
    }
  }
  printf("marker: %s\n", found ? "found" : "not found");
  return 0;
}

/* forks N: children that wait; prints how many started */
static int do_forks(const char* count) {
  const int wanted = atoi(count);
  int started = 0;
  int err = 0;
  for (; started < wanted; ++started) {
    const pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid < 0) {
      err = errno;
      break;
    }
  }
  printf("forks started: %d %s\n", started, err ? strerrorname_np(err) : "");
  fflush(stdout);
  return 0;
}

static int do_bomb(void) {
  for (;;) {
    fork();
  }
}

/* fill FOLDER one|many: one growing file, or 1 MiB files until the first error */
static int do_fill(const char* folder, const char* how) {
  static char chunk[1 << 20];
  memset(chunk, 'x', sizeof chunk);
  const int many = strcmp(how, "many") == 0;
  long written = 0;
  int err = 0;
  int fd = -1;
  for (int i = 0; i < 100000 && err == 0; ++i) {
    if (fd < 0 || many) {
      if (fd >= 0) {
        close(fd);
      }
      char path[512];
      snprintf(path, sizeof path, "%s/fill-%d", folder, many ? i : 0);
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) {
        err = errno;
        break;
      }
    }
    const ssize_t n = write(fd, chunk, sizeof chunk);
    if (n < 0) {
      err = errno;
    } else {
      written += n;
      if (n < (ssize_t)sizeof chunk) {
        err = ENOSPC;
      }
    }
  }
  printf("fill written: %ld MiB, stopped by %s\n", written >> 20,
         err ? strerrorname_np(err) : "nothing");
  return 0;
}

/* files: opens /dev/null until the first error */
static int do_files(void) {
  int opened = 0;
  while (open("/dev/null", O_RDONLY) >= 0) {
    ++opened;
  }
  printf("files opened: %d %s\n", opened, strerrorname_np(errno));
  return 0;
}

static int do_spin(void) {
  volatile unsigned long n = 0;
  for (;;) {
    ++n;
  }
}

static int do_sleep(void) {
  for (;;) {
    pause();
  }
}

static int do_whoami(void) {
  printf("uid: %d\ngid: %d\n", (int)getuid(), (int)getgid());
  FILE* status = fopen("/proc/self/status", "r");
  char line[256];
  while (status != NULL && fgets(line, sizeof line, status) != NULL) {
    if (strncmp(line, "CapEff:", 7) == 0 || strncmp(line, "NoNewPrivs:", 11) == 0) {
      fputs(line, stdout);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: adversary COMMAND ARGS...\n");
    return 2;
  }
  const char* command = argv[1];
  if (strcmp(command, "connect") == 0 && argc == 4)
    return do_connect(argv[2], argv[3]);
  if (strcmp(command, "read") == 0)
    return do_read(argc - 2, argv + 2);
  if (strcmp(command, "write") == 0)
    return do_write(argc - 2, argv + 2);
  if (strcmp(command, "env") == 0 && argc >= 3)
    return do_env(argc - 2, argv + 2);
  if (strcmp(command, "forks") == 0 && argc == 3)
    return do_forks(argv[2]);
  if (strcmp(command, "bomb") == 0)
    return do_bomb();
  if (strcmp(command, "fill") == 0 && argc == 4)
    return do_fill(argv[2], argv[3]);
  if (strcmp(command, "files") == 0)
    return do_files();
  if (strcmp(command, "spin") == 0)
    return do_spin();
  if (strcmp(command, "sleep") == 0)
    return do_sleep();
  if (strcmp(command, "whoami") == 0)
    return do_whoami();
  fprintf(stderr, "adversary: unknown command %s\n", command);
  return 2;
}
