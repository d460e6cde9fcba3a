package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTree makes files (paths relative to a temp dir) and returns the dir.
func fakeTree(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeLibEnv is a search environment over root: variables from vars
// (values may name $ROOT), absolute patterns globbed under root, and
// python3 reporting pyDirs (under root) or failing.
func fakeLibEnv(root string, vars map[string]string, pyDirs []string, pyErr error) libEnv {
	fix := func(s string) string { return strings.ReplaceAll(s, "$ROOT", root) }
	return libEnv{
		getenv: func(k string) string { return fix(vars[k]) },
		home:   func() (string, error) { return filepath.Join(root, "home"), nil },
		glob: func(p string) ([]string, error) {
			if !strings.HasPrefix(p, root) {
				p = root + p
			}
			return filepath.Glob(p)
		},
		python: func() ([]string, error) {
			var dirs []string
			for _, d := range pyDirs {
				dirs = append(dirs, fix(d))
			}
			return dirs, pyErr
		},
	}
}

// searchOrder runs the NCCL search with an open that succeeds only for
// files under root (the loader's bare name always fails), and returns the
// files tried, relative to root, and the result.
func searchOrder(t *testing.T, e libEnv, root string, places []libPlace) ([]string, Library, error) {
	t.Helper()
	var tried []string
	lib, err := findLibrary(places, func(file string) error {
		tried = append(tried, strings.TrimPrefix(file, root))
		if !strings.HasPrefix(file, root) {
			return errors.New("cannot open shared object file: No such file or directory")
		}
		return nil
	})
	lib.Path = strings.TrimPrefix(lib.Path, root)
	return tried, lib, err
}

// NCCL is found where pip, conda and the system put it, in the documented
// order, and only then through python3.
func TestNCCLSearchOrder(t *testing.T) {
	const so = "/nvidia/nccl/lib/libnccl.so.2"
	root := fakeTree(t,
		"/venv/lib/python3.12/site-packages"+so,
		"/conda/lib/python3.11/site-packages"+so,
		"/conda/lib/libnccl.so.2",
		"/home/.local/lib/python3.10/site-packages"+so,
		"/usr/local/lib/python3.12/dist-packages"+so,
		"/pyenv/site-packages"+so,
	)
	all := map[string]string{"VIRTUAL_ENV": "$ROOT/venv", "CONDA_PREFIX": "$ROOT/conda"}
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		remove []string // files to delete first, relative to root
		from   string
		path   string
	}{
		{"virtualenv first", all, nil, "site-packages of $VIRTUAL_ENV", "/venv/lib/python3.12/site-packages" + so},
		{"then conda's site-packages", map[string]string{"CONDA_PREFIX": "$ROOT/conda"}, nil, "$CONDA_PREFIX", "/conda/lib/python3.11/site-packages" + so},
		{"then conda's lib", map[string]string{"CONDA_PREFIX": "$ROOT/conda"}, []string{"/conda/lib/python3.11/site-packages" + so}, "$CONDA_PREFIX", "/conda/lib/libnccl.so.2"},
		{"then the user's", nil, nil, "the user's site-packages", "/home/.local/lib/python3.10/site-packages" + so},
		{"then the system's", nil, []string{"/home/.local/lib/python3.10/site-packages" + so}, "the system's site-packages", "/usr/local/lib/python3.12/dist-packages" + so},
		{"python3 last", nil, []string{"/usr/local/lib/python3.12/dist-packages" + so}, "the site-packages python3 on PATH reports", "/pyenv/site-packages" + so},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range tc.remove {
				os.Remove(root + f)
			}
			e := fakeLibEnv(root, tc.vars, []string{"$ROOT/pyenv/site-packages"}, nil)
			tried, lib, err := searchOrder(t, e, root, e.ncclPlaces())
			if err != nil {
				t.Fatal(err)
			}
			if lib.From != tc.from || lib.Path != tc.path {
				t.Errorf("found %s from %q, want %s from %q", lib.Path, lib.From, tc.path, tc.from)
			}
			if tried[0] != LibNCCL {
				t.Errorf("the loader's path was not tried first: %v", tried)
			}
		})
	}
}

// COMMSIM_NCCL_LIBRARY is authoritative: when it is set, nothing else is
// tried, and its failure is the error.
func TestNCCLSearchVariableIsAuthoritative(t *testing.T) {
	root := fakeTree(t, "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", "/mine/libnccl.so.2")
	e := fakeLibEnv(root, map[string]string{EnvNCCLLibrary: "$ROOT/mine/libnccl.so.2", "VIRTUAL_ENV": "$ROOT/venv"}, nil, nil)
	tried, lib, err := searchOrder(t, e, root, e.ncclPlaces())
	if err != nil || lib.From != EnvNCCLLibrary || lib.Path != "/mine/libnccl.so.2" || !slices.Equal(tried, []string{"/mine/libnccl.so.2"}) {
		t.Errorf("found %+v (%v) after trying %v", lib, err, tried)
	}
	e = fakeLibEnv(root, map[string]string{EnvNCCLLibrary: "/elsewhere/libnccl.so.2", "VIRTUAL_ENV": "$ROOT/venv"}, nil, nil)
	tried, _, err = searchOrder(t, e, root, e.ncclPlaces())
	if err == nil || !slices.Equal(tried, []string{"/elsewhere/libnccl.so.2"}) || !strings.Contains(err.Error(), "COMMSIM_NCCL_LIBRARY: /elsewhere/libnccl.so.2: cannot open") {
		t.Errorf("a bad %s: %v after trying %v", EnvNCCLLibrary, err, tried)
	}
}

// When NCCL is nowhere, the error names every place tried and why each
// failed, python3's answer included.
func TestNCCLSearchNamesEveryPlace(t *testing.T) {
	root := fakeTree(t, "/venv/lib/python3.12/site-packages/numpy/__init__.py")
	e := fakeLibEnv(root, map[string]string{"VIRTUAL_ENV": "$ROOT/venv"}, []string{"/pyenv/site-packages"}, nil)
	_, _, err := searchOrder(t, e, root, e.ncclPlaces())
	if err == nil {
		t.Fatal("found NCCL in an empty tree")
	}
	msg := strings.ReplaceAll(err.Error(), root, "")
	for _, want := range []string{
		"COMMSIM_NCCL_LIBRARY: unset",
		"the loader's search path: libnccl.so.2: cannot open shared object file",
		"site-packages of $VIRTUAL_ENV: nothing at /venv{/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2,",
		"$CONDA_PREFIX: unset",
		"the user's site-packages: nothing at /home/.local{",
		"the system's site-packages: nothing at {/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2,",
		"the site-packages python3 on PATH reports: no nvidia/nccl/lib/libnccl.so.2 under /pyenv/site-packages",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	e.python = func() ([]string, error) { return nil, errors.New("no python3 on PATH") }
	if _, _, err := searchOrder(t, e, root, e.ncclPlaces()); err == nil || !strings.HasSuffix(err.Error(), "the site-packages python3 on PATH reports: no python3 on PATH") {
		t.Errorf("without python3: %v", err)
	}
}

// The driver is looked for on the loader's path, then where containers,
// WSL2 and NixOS put it; a driver that loads but fails stops the search.
func TestDriverSearch(t *testing.T) {
	root := fakeTree(t, "/usr/lib/wsl/lib/libcuda.so.1", "/run/opengl-driver/lib/libcuda.so.1")
	e := fakeLibEnv(root, nil, nil, nil)
	tried, lib, err := searchOrder(t, e, root, e.driverPlaces())
	if err != nil || lib.Path != "/usr/lib/wsl/lib/libcuda.so.1" || lib.From != "the driver's usual directories" || tried[0] != LibCUDA {
		t.Errorf("found %+v (%v) after trying %v", lib, err, tried)
	}
	noGPU := errors.New("cuInit: CUresult 100: no CUDA-capable device is detected")
	var opened []string
	_, err = findLibrary(e.driverPlaces(), func(file string) error {
		opened = append(opened, file)
		if strings.HasPrefix(file, root) {
			return stopSearch{noGPU}
		}
		return errors.New("not found")
	})
	if !errors.Is(err, noGPU) || len(opened) != 2 || !strings.HasPrefix(err.Error(), "the driver's usual directories: "+root+"/usr/lib/wsl/lib/libcuda.so.1: cuInit") {
		t.Errorf("a driver without a GPU: %v after opening %v", err, opened)
	}
}

func TestNCCLVersionString(t *testing.T) {
	for code, want := range map[int]string{22703: "2.27.3", 21805: "2.18.5", 2708: "2.7.8", 2804: "2.8.4"} {
		if got := NCCLVersionString(code); got != want {
			t.Errorf("NCCLVersionString(%d) = %s, want %s", code, got, want)
		}
	}
}
