//go:build linux || darwin

package dlfcn

import (
	"strings"
	"sync"
	"testing"
)

// A library that is not there is an error that names it, every time, from
// any goroutine: dlerror's message is the failing thread's, so a goroutine
// that changed threads between dlopen and dlerror once gave an empty reason
// (a few calls in a thousand; this makes sixteen thousand).
func TestOpenErrorNamesTheLibraryEveryTime(t *testing.T) {
	const name = "libcommsim-no-such-library.so.1"
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				_, err := Open(name)
				if err == nil || !strings.Contains(err.Error(), name) {
					mu.Lock()
					bad = append(bad, fmtErr(err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d of 16000 failed opens did not name the library, e.g. %q", len(bad), bad[0])
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
