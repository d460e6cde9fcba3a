package cuda

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Libraries are found where people have them, not only where the dynamic
// loader looks. NCCL in particular usually comes from pip (nvidia-nccl-cu12
// or -cu13, which PyTorch installs) into site-packages/nvidia/nccl/lib,
// which is on no loader path. A search is a list of places, each tried in
// order; every place tried is named in the error when none works, so the
// user sees where to put the library or which variable to set.

// Library says which file a library was loaded from.
type Library struct {
	// Path is the file: the path opened, or, for a bare name the loader
	// resolved, the file /proc/self/maps shows it mapped from (the bare
	// name where that cannot be read).
	Path string
	// From says how it was found: the environment variable, the loader's
	// search path, or the Python environment whose site-packages held it.
	From string
}

func (l Library) String() string { return l.Path + " (" + l.From + ")" }

// LibCUDA is the driver library's name.
const LibCUDA = "libcuda.so.1"

// EnvCUDALibrary names the driver library to load instead of searching
// for libcuda.so.1.
const EnvCUDALibrary = "COMMSIM_CUDA_LIBRARY"

// libPlace is one place a library may be: a description for messages and
// the candidate files there (bare names go to the dynamic loader). When
// there are none, why says so ("unset", "nothing at …"). An only place is
// authoritative: when it has a file, no later place is tried, since a user
// who names a file wants that file and not another one found elsewhere.
type libPlace struct {
	what  string
	files func() (files []string, why string)
	only  bool
}

// libEnv is what a search reads of the process's surroundings; tests
// replace it.
type libEnv struct {
	getenv func(string) string
	home   func() (string, error)
	glob   func(pattern string) ([]string, error)
	// python lists the directories python3 on PATH searches for packages
	// (site.getsitepackages, the user site, sys.path).
	python func() ([]string, error)
}

var osLibEnv = libEnv{getenv: os.Getenv, home: os.UserHomeDir, glob: filepath.Glob, python: pythonSitePackages}

// findLibrary tries each place's files with open, in order, and returns
// the first that opens. An open error wrapped in stopSearch ends the
// search (a driver that loads but sees no GPU: another copy would not
// help).
func findLibrary(places []libPlace, open func(file string) error) (Library, error) {
	var tried []string
	seen := map[string]bool{}
	for _, p := range places {
		files, why := p.files()
		if len(files) == 0 {
			tried = append(tried, p.what+": "+why)
			continue
		}
		for _, f := range files {
			if seen[f] {
				continue
			}
			seen[f] = true
			err := open(f)
			if err == nil {
				return Library{Path: resolvedPath(f), From: p.what}, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %s: %v", p.what, f, err))
			var stop stopSearch
			if errors.As(err, &stop) {
				return Library{}, &searchError{tried: tried, cause: stop.err}
			}
		}
		if p.only {
			return Library{}, &searchError{tried: tried}
		}
	}
	return Library{}, &searchError{tried: tried}
}

// stopSearch wraps an open error after which trying other places makes no
// sense.
type stopSearch struct{ err error }

func (s stopSearch) Error() string { return s.err.Error() }
func (s stopSearch) Unwrap() error { return s.err }

// searchError lists every place a search tried and what happened there.
type searchError struct {
	tried []string
	cause error // why the search stopped early, or nil
}

func (e *searchError) Error() string {
	if e.cause != nil {
		return e.tried[len(e.tried)-1]
	}
	return "tried " + strings.Join(e.tried, "; ")
}
func (e *searchError) Unwrap() error { return e.cause }

// resolvedPath is the file the loader mapped for a bare name, read from
// /proc/self/maps, or the path itself.
func resolvedPath(file string) string {
	if strings.ContainsRune(file, '/') {
		return file
	}
	stem, _, _ := strings.Cut(file, ".so")
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return file
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := fields[len(fields)-1]
		if strings.HasPrefix(filepath.Base(path), stem+".so") {
			return path
		}
	}
	return file
}

// envPlace is the library named by variable v, when set; it is the only
// place tried then.
func (e libEnv) envPlace(v string) libPlace {
	return libPlace{what: v, only: true, files: func() ([]string, string) {
		if p := e.getenv(v); p != "" {
			return []string{p}, ""
		}
		return nil, "unset"
	}}
}

// loaderPlace is a bare name for the dynamic loader (LD_LIBRARY_PATH,
// ld.so.cache, the default directories).
func loaderPlace(soname string) libPlace {
	return libPlace{what: "the loader's search path", files: func() ([]string, string) { return []string{soname}, "" }}
}

// globPlace is every file matching the patterns under the directory dir
// returns; dir returns "" and a reason when there is none to look in, and
// "" with no reason for absolute patterns.
func (e libEnv) globPlace(what string, dir func() (string, string), patterns ...string) libPlace {
	return libPlace{what: what, files: func() ([]string, string) {
		prefix, why := dir()
		if why != "" {
			return nil, why
		}
		var files []string
		for _, p := range patterns {
			m, _ := e.glob(prefix + p)
			files = append(files, m...)
		}
		if len(files) == 0 {
			return nil, "nothing at " + prefix + "{" + strings.Join(patterns, ",") + "}"
		}
		return files, ""
	}}
}

// fromVar is a glob place's directory: variable v's value.
func (e libEnv) fromVar(v string) func() (string, string) {
	return func() (string, string) {
		if p := e.getenv(v); p != "" {
			return p, ""
		}
		return "", "unset"
	}
}

func absolute() (string, string) { return "", "" }

// userBase is Python's user base: $PYTHONUSERBASE, else ~/.local.
func (e libEnv) userBase() (string, string) {
	if b := e.getenv("PYTHONUSERBASE"); b != "" {
		return b, ""
	}
	home, err := e.home()
	if err != nil || home == "" {
		return "", "no home directory"
	}
	return filepath.Join(home, ".local"), ""
}

// The site-packages directories of a Python prefix, as globs.
var sitePackages = []string{"/lib/python3*/site-packages", "/lib64/python3*/site-packages"}

// ncclInPip is where the nvidia-nccl-cu12 and -cu13 wheels put NCCL inside
// a site-packages directory.
const ncclInPip = "/nvidia/nccl/lib/" + LibNCCL

func under(dirs []string, file string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = d + file
	}
	return out
}

// ncclPlaces is where NCCL is looked for, in order: COMMSIM_NCCL_LIBRARY
// (alone, when set), the loader's path, the site-packages of the active
// virtualenv and conda environment (and conda's own lib, where conda's
// nccl package goes), the user's and the system's Python directories, and
// last the directories python3 on PATH reports: that runs python3, so it
// comes only after everything cheaper failed.
func (e libEnv) ncclPlaces() []libPlace {
	system := []string{
		"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages", "/usr/lib/python3*/dist-packages",
		"/usr/lib64/python3*/site-packages", "/usr/local/lib64/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages",
	}
	return []libPlace{
		e.envPlace(EnvNCCLLibrary),
		loaderPlace(LibNCCL),
		e.globPlace("site-packages of $VIRTUAL_ENV", e.fromVar("VIRTUAL_ENV"), under(sitePackages, ncclInPip)...),
		e.globPlace("$CONDA_PREFIX", e.fromVar("CONDA_PREFIX"), append(under(sitePackages, ncclInPip), "/lib/"+LibNCCL)...),
		e.globPlace("the user's site-packages", e.userBase, under(sitePackages, ncclInPip)...),
		e.globPlace("the system's site-packages", absolute, under(system, ncclInPip)...),
		e.pythonPlace(),
	}
}

// pythonPlace asks python3 on PATH where its packages are.
func (e libEnv) pythonPlace() libPlace {
	return libPlace{what: "the site-packages python3 on PATH reports", files: func() ([]string, string) {
		dirs, err := e.python()
		if err != nil {
			return nil, err.Error()
		}
		var files []string
		for _, d := range dirs {
			m, _ := e.glob(d + ncclInPip)
			files = append(files, m...)
		}
		if len(files) == 0 {
			return nil, fmt.Sprintf("no %s under %s", strings.TrimPrefix(ncclInPip, "/"), strings.Join(dirs, ", "))
		}
		return files, ""
	}}
}

// pythonSitePackages runs python3 on PATH for its package directories.
func pythonSitePackages() ([]string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, errors.New("no python3 on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const script = "import site, sys\n" +
		"dirs = list(getattr(site, 'getsitepackages', lambda: [])()) + [site.getusersitepackages()] + sys.path\n" +
		"print('\\n'.join(d for d in dirs if d))\n"
	out, err := exec.CommandContext(ctx, py, "-c", script).Output()
	if err != nil {
		return nil, fmt.Errorf("%s failed: %v", py, err)
	}
	var dirs []string
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if d = strings.TrimSpace(d); d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// driverPlaces is where the driver library is looked for, in order:
// COMMSIM_CUDA_LIBRARY, the loader's path, and the directories drivers are
// installed to that some loaders do not search (containers mount
// /usr/local/nvidia, WSL2 uses /usr/lib/wsl/lib, NixOS /run/opengl-driver).
func (e libEnv) driverPlaces() []libPlace {
	dirs := []string{
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
		"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/run/opengl-driver/lib",
	}
	return []libPlace{
		e.envPlace(EnvCUDALibrary),
		loaderPlace(LibCUDA),
		e.globPlace("the driver's usual directories", absolute, under(dirs, "/"+LibCUDA)...),
	}
}
