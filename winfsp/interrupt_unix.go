//go:build linux && cgo && fuse3

package winfsp

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>

static int (*pfn_fuse_interrupted)(void);

// resolve finds fuse_interrupted in the libfuse3 that cgofuse loaded
// (RTLD_NOLOAD: never a second copy). It returns 0 if there is none.
static int resolve(void) {
	void *h = dlopen("libfuse3.so.3", RTLD_NOW | RTLD_NOLOAD);
	if (h == 0)
		return 0;
	pfn_fuse_interrupted = (int (*)(void))dlsym(h, "fuse_interrupted");
	return pfn_fuse_interrupted != 0;
}

static int call_interrupted(void) { return pfn_fuse_interrupted(); }
*/
import "C"

import "sync"

var resolveInterrupted = sync.OnceValue(func() bool { return C.resolve() != 0 })

// interrupted reports whether the kernel has interrupted the request this
// callback serves (FUSE INTERRUPT, recorded by libfuse whatever its intr
// option: fuse_interrupted(3)). Call it only on a callback's thread.
func interrupted() bool {
	return resolveInterrupted() && C.call_interrupted() != 0
}
