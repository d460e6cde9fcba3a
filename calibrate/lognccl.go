package calibrate

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/nccl"
)

var (
	// NCCL's version line (NCCL_DEBUG=VERSION or INFO): "NCCL version
	// 2.21.5+cuda12.4"; and nccl-tests' header: "nccl-library=22105".
	versionRE = regexp.MustCompile(`\bNCCL version (\d+\.\d+(?:\.\d+)?)`)
	libraryRE = regexp.MustCompile(`\bnccl-library=(\d+)`)
	// NCCL_DEBUG=INFO's word on the environment it read: "NCCL_PROTO set
	// by environment to Simple", "NCCL_BUFFSIZE set by environment to
	// 8388608." (its integer parameters end in a full stop).
	envRE = regexp.MustCompile(`\b(NCCL_[A-Z0-9_]+) set by environment to (\S+)`)
)

// readNCCLLine takes from line, one of NCCL's own or a comment, the NCCL
// version or an environment variable it states.
func (l *Log) readNCCLLine(line string) {
	if m := versionRE.FindStringSubmatch(line); m != nil && l.NCCLVersion == "" {
		l.NCCLVersion = m[1]
	}
	if m := libraryRE.FindStringSubmatch(line); m != nil && l.NCCLVersion == "" {
		if code, err := strconv.Atoi(m[1]); err == nil && code > 0 {
			l.NCCLVersion = versionOfCode(code)
		}
	}
	if m := envRE.FindStringSubmatch(line); m != nil {
		value := m[2]
		if v, ok := strings.CutSuffix(value, "."); ok && isInt(v) {
			value = v
		}
		l.setNCCLEnv(m[1], value)
	}
}

// setNCCLEnv records that NCCL read variable name as value; the first
// word on it stands (every rank says it).
func (l *Log) setNCCLEnv(name, value string) {
	if l.NCCLEnv == nil {
		l.NCCLEnv = map[string]string{}
	}
	if _, seen := l.NCCLEnv[name]; !seen {
		l.NCCLEnv[name] = value
	}
}

// versionOfCode spells NCCL_VERSION_CODE: 22105 is 2.21.5 (from 2.9 on,
// major×10000 + minor×100 + patch; before, major×1000 + minor×100 +
// patch).
func versionOfCode(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// LogNCCL is the NCCL environment a log's own lines state (NCCL's
// version, and the variables NCCL_DEBUG=INFO says it read), as far as
// commsim follows it.
type LogNCCL struct {
	Options nccl.Options
	Env     map[string]string // the variables commsim follows (nccl.EnvVars), by name
	Ignored []string          // the others, as NAME=value, sorted
}

// NCCLOptions is what the log states of NCCL: its own lines, nccl-tests'
// header or JSON report. stated is false where the log states neither a
// version nor a variable commsim follows.
func (l *Log) NCCLOptions() (run LogNCCL, stated bool, err error) {
	for name, value := range l.NCCLEnv {
		if !slices.Contains(nccl.EnvVars, name) {
			run.Ignored = append(run.Ignored, name+"="+value)
			continue
		}
		if run.Env == nil {
			run.Env = map[string]string{}
		}
		run.Env[name] = value
	}
	slices.Sort(run.Ignored)
	if run.Options, err = nccl.FromEnv(run.Env); err != nil {
		return run, true, fmt.Errorf("the log's NCCL environment: %w", err)
	}
	if l.NCCLVersion != "" {
		if run.Options.Version, err = nccl.ParseVersion(l.NCCLVersion); err != nil {
			return run, true, fmt.Errorf("the log's NCCL %s: %w", l.NCCLVersion, err)
		}
	}
	return run, l.NCCLVersion != "" || len(run.Env) > 0, nil
}
