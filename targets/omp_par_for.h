/* Halide's parallel loops on PyTorch's OpenMP team, where PyTorch is loaded
 * into the process, instead of Halide's own thread pool.
 *
 * Why: inside a PyTorch program, PyTorch's OpenMP threads spin for a while
 * after each of its parallel regions, and Halide's pool then runs on the same
 * cores beside them: a 4.4 ms FFN forward took 6.4 ms more after a 2.2 ms
 * torch matmul on two cores, 4.6 ms more on PyTorch's team
 * (docs/interop/pytorch.md, "One thread pool with PyTorch").
 *
 * Contract: mlk_omp_team() fills `t` from libtorch_cpu when it is loaded:
 * GOMP_parallel as libtorch_cpu resolves it (its own OpenMP runtime, GNU's,
 * LLVM's or Intel's, all of which export it) and at::get_num_threads, found
 * without loading anything; once found, kept; until then looked up again
 * only after the process loaded more libraries. Returns 0 where PyTorch is
 * not loaded (a process that links an OpenMP runtime for other reasons, such
 * as the mlk CLI through XGBoost, keeps Halide's pool). mlk_omp_do_par_for
 * has halide_do_par_for's contract (every index in [min, min + size) run
 * once, in any order, on any thread; the result is 0 or a task's nonzero
 * result) on a team of at::get_num_threads() threads, as PyTorch's own
 * parallel regions have, each taking the next index until none is left.
 * Plain C, compiled with _GNU_SOURCE (dl_iterate_phdr): the C wrapper of
 * every CPU artifact embeds it (artifact/build.cpp) and the JIT includes it
 * (scheduler/compile.cpp). Thread-safe. */
#ifndef MLK_TARGETS_OMP_PAR_FOR_H_
#define MLK_TARGETS_OMP_PAR_FOR_H_

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MLK_OMP_FN static __attribute__((unused))

struct mlk_omp_team_t {
  void (*parallel)(void (*)(void*), void*, unsigned, unsigned); /* GOMP_parallel */
  int (*threads)(void);                                          /* at::get_num_threads */
};

static pthread_mutex_t mlk_omp_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mlk_omp_team_t mlk_omp_found; /* set once, under mlk_omp_mu */
static int mlk_omp_done;                    /* 1 once mlk_omp_found is set (read without the lock) */
static unsigned long long mlk_omp_adds = ~0ull; /* the loader's count of loads at the last look */

struct mlk_omp_scan {
  unsigned long long adds;
  char torch[4096]; /* libtorch_cpu's path, if loaded */
};

MLK_OMP_FN int mlk_omp_adds_cb(struct dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    ((struct mlk_omp_scan*)data)->adds = info->dlpi_adds;
  return 1; /* the first object carries the count */
}

MLK_OMP_FN int mlk_omp_torch_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  const char* b = strrchr(info->dlpi_name, '/');
  b = b ? b + 1 : info->dlpi_name;
  if (strncmp(b, "libtorch_cpu.", 13) != 0 || strlen(info->dlpi_name) >= sizeof ((struct mlk_omp_scan*)data)->torch)
    return 0;
  strcpy(((struct mlk_omp_scan*)data)->torch, info->dlpi_name);
  return 1;
}

/* 1 with `t` filled where PyTorch's team is available, else 0. */
MLK_OMP_FN int mlk_omp_team(struct mlk_omp_team_t* t) {
  if (!__atomic_load_n(&mlk_omp_done, __ATOMIC_ACQUIRE)) {
    struct mlk_omp_scan s;
    s.adds = 0;
    s.torch[0] = 0;
    dl_iterate_phdr(mlk_omp_adds_cb, &s);
    if (s.adds == __atomic_load_n(&mlk_omp_adds, __ATOMIC_ACQUIRE)) return 0; /* nothing loaded since */
    pthread_mutex_lock(&mlk_omp_mu);
    if (!mlk_omp_done) {
      dl_iterate_phdr(mlk_omp_torch_cb, &s);
      void* h = s.torch[0] ? dlopen(s.torch, RTLD_NOW | RTLD_NOLOAD) : 0; /* loaded already: a reference */
      if (h) {
        /* Searched in libtorch_cpu and its dependencies: PyTorch's own runtime. */
        struct mlk_omp_team_t f;
        f.parallel = (void (*)(void (*)(void*), void*, unsigned, unsigned))dlsym(h, "GOMP_parallel");
        f.threads = (int (*)(void))dlsym(h, "_ZN2at15get_num_threadsEv");
        if (f.parallel && f.threads) {
          mlk_omp_found = f;
          __atomic_store_n(&mlk_omp_done, 1, __ATOMIC_RELEASE);
        } else {
          dlclose(h);
        }
      }
      __atomic_store_n(&mlk_omp_adds, s.adds, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mlk_omp_mu);
    if (!__atomic_load_n(&mlk_omp_done, __ATOMIC_ACQUIRE)) return 0;
  }
  *t = mlk_omp_found;
  return 1;
}

struct mlk_omp_job {
  int (*f)(void*, int, uint8_t*);
  void* user_context;
  uint8_t* closure;
  int min, size, next, result;
};

MLK_OMP_FN void mlk_omp_body(void* p) {
  struct mlk_omp_job* j = (struct mlk_omp_job*)p;
  for (;;) {
    int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (i >= j->size || __atomic_load_n(&j->result, __ATOMIC_RELAXED)) return;
    int r = j->f(j->user_context, j->min + i, j->closure);
    if (r) __atomic_store_n(&j->result, r, __ATOMIC_RELAXED);
  }
}

/* halide_do_par_for on team `t` (filled by mlk_omp_team). */
MLK_OMP_FN int mlk_omp_do_par_for(const struct mlk_omp_team_t* t, void* user_context, int (*f)(void*, int, uint8_t*),
                                  int min, int size, uint8_t* closure) {
  if (size <= 0) return 0;
  if (size == 1) return f(user_context, min, closure);
  struct mlk_omp_job j = {f, user_context, closure, min, size, 0, 0};
  int n = t->threads();
  t->parallel(mlk_omp_body, &j, (unsigned)(n < 1 ? 1 : n < size ? n : size), 0);
  return j.result;
}

#endif /* MLK_TARGETS_OMP_PAR_FOR_H_ */
