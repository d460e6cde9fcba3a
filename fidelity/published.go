package fidelity

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// The published runs live in the package, not in a testdata folder: the
// commsim binary carries them, so `commsim fidelity --log FILE` knows a
// shipped log's fabric, and a user's clone has every log the test reads.
//
//go:embed nccl-logs
var logsFS embed.FS

const (
	logsDir     = "nccl-logs"
	mappingFile = "logs.yaml"
)

// PublishedLog is one published nccl-tests run and what it is compared
// against, as the mapping file states it.
type PublishedLog struct {
	File  string `yaml:"file"`  // in nccl-logs/
	Op    string `yaml:"op"`    // commsim's name of the collective
	Ranks int    `yaml:"ranks"` // as the header states them
	// Topo is the fabric to predict on: a preset, with overrides where
	// the log's hardware differs from the preset's datasheet (Overrides
	// says why). Never numbers fitted to the log.
	Topo      string `yaml:"topo"`
	Overrides string `yaml:"overrides,omitempty"`
	Hardware  string `yaml:"hardware"`
	// NCCLVersion and NCCLSettings are what the log's header states. A
	// version given as a release (2.N…) selects NCCL's constants of that
	// release.
	NCCLVersion  string `yaml:"nccl_version"`
	NCCLSettings string `yaml:"nccl_settings"`
	// NCCLPresumed, where the header states no release, is the one the
	// run presumably had, from a source Notes cites (the container its
	// repository built when the log was published, say); the check runs
	// that release's constants, as it would a stated one's.
	NCCLPresumed string `yaml:"nccl_presumed,omitempty"`
	// NCCLEnv is the NCCL environment the run had that commsim reproduces
	// (nccl.FromEnv), set by its header or by what it ran with (a plugin
	// that sets NCCL_PROTO, say: Notes says where from). The check runs
	// NCCL's tuner in it.
	NCCLEnv map[string]string `yaml:"nccl_env,omitempty"`
	// Exclude, when set, is why the log is left out of the targets and
	// the ratchet: it ran with something commsim cannot reproduce. It is
	// still checked, and must still parse and predict.
	Exclude string `yaml:"exclude,omitempty"`
	// HeldOut, when set, says where a run found after the model was
	// built comes from: not one of issue #16's logs, it is held to its
	// own ratchet but left out of the pooled targets, so that it shows
	// how the model does on runs it was not shaped on.
	HeldOut string `yaml:"held_out,omitempty"`
	// MaxMedianError is the ratchet: the log's median error may not
	// exceed it. 0 means no bound recorded yet.
	MaxMedianError float64 `yaml:"max_median_error,omitempty"`
	// Misses name, for every size the model misses by more than
	// MissBound with --algo nccl in the run's environment, what is known
	// of why. The test fails on a size off by more than that which none
	// names, and on a miss none of whose sizes is any longer.
	Misses []Miss `yaml:"misses,omitempty"`
	Notes  string `yaml:"notes,omitempty"`

	// Data is the log file's bytes.
	Data []byte `yaml:"-"`
}

// MissBound is issue #16's bound on any one size's error: a size off by
// more than it needs a cause named (PublishedLog.Misses).
const MissBound = 0.30

// Miss is a range of a log's sizes that the model misses by more than
// MissBound, and why, as far as is known ("not known" is an answer).
type Miss struct {
	// Bytes are the first and the last size of the range, in the log's
	// meaning of size.
	Bytes [2]int64 `yaml:"bytes,flow" json:"bytes"`
	Cause string   `yaml:"cause" json:"cause"`
}

// Covers reports whether the range holds bytes.
func (m Miss) Covers(bytes int64) bool { return m.Bytes[0] <= bytes && bytes <= m.Bytes[1] }

// Range is the range as a person reads it: "8–4096 bytes", "8388608 bytes".
func (m Miss) Range() string {
	if m.Bytes[0] == m.Bytes[1] {
		return fmt.Sprintf("%d bytes", m.Bytes[0])
	}
	return fmt.Sprintf("%d–%d bytes", m.Bytes[0], m.Bytes[1])
}

// checkMisses reports misses that are not ranges of sizes in order, or
// that name no cause.
func (l *PublishedLog) checkMisses() error {
	for i, m := range l.Misses {
		switch {
		case m.Bytes[0] < 1 || m.Bytes[1] < m.Bytes[0]:
			return fmt.Errorf("miss %d: bytes %v is not a range of sizes, first to last", i+1, m.Bytes)
		case strings.TrimSpace(m.Cause) == "":
			return fmt.Errorf("miss %d (%s): no cause", i+1, m.Range())
		case i > 0 && m.Bytes[0] <= l.Misses[i-1].Bytes[1]:
			return fmt.Errorf("miss %d (%s) does not come after miss %d (%s)", i+1, m.Range(), i, l.Misses[i-1].Range())
		}
	}
	return nil
}

// Catalog is the mapping file: every published log, and the ratchet on
// the band medians pooled over the logs that have a bound.
type Catalog struct {
	// PooledMaxMedianError bounds the pooled median error of each band,
	// by Band.Key.
	PooledMaxMedianError map[string]float64 `yaml:"pooled_max_median_error"`
	Logs                 []PublishedLog     `yaml:"logs"`
}

// Published reads the mapping file and the logs it names. Every log file
// must be named there once, and every entry must name a log, an op and a
// fabric.
func Published() (*Catalog, error) { return readCatalog(logsFS) }

// readCatalog is Published on the files of fsys, under logsDir.
func readCatalog(fsys fs.FS) (*Catalog, error) {
	data, err := fs.ReadFile(fsys, path.Join(logsDir, mappingFile))
	if err != nil {
		return nil, err
	}
	var c Catalog
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("fidelity: %s: %w", mappingFile, err)
	}
	for _, k := range slices.Sorted(maps.Keys(c.PooledMaxMedianError)) {
		if !slices.ContainsFunc(Bands, func(b Band) bool { return b.Key == k }) {
			return nil, fmt.Errorf("fidelity: %s: pooled_max_median_error: unknown band %q", mappingFile, k)
		}
	}
	named := map[string]bool{}
	for i := range c.Logs {
		l := &c.Logs[i]
		if _, err := ops.ParseOp(l.Op); err != nil || l.Topo == "" || l.Ranks < 1 {
			return nil, fmt.Errorf("fidelity: %s: log %q: want an op, a topo and ranks (op %q, topo %q, ranks %d)", mappingFile, l.File, l.Op, l.Topo, l.Ranks)
		}
		if _, err := l.Options(); err != nil {
			return nil, fmt.Errorf("fidelity: %s: log %q: %w", mappingFile, l.File, err)
		}
		if err := l.checkMisses(); err != nil {
			return nil, fmt.Errorf("fidelity: %s: log %q: %w", mappingFile, l.File, err)
		}
		if named[l.File] {
			return nil, fmt.Errorf("fidelity: %s: log %q named twice", mappingFile, l.File)
		}
		named[l.File] = true
		if l.Data, err = fs.ReadFile(fsys, path.Join(logsDir, l.File)); err != nil {
			return nil, fmt.Errorf("fidelity: %s: %w", mappingFile, err)
		}
	}
	files, err := fs.Glob(fsys, logsDir+"/*.txt")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if !named[path.Base(f)] {
			return nil, fmt.Errorf("fidelity: %s: log %s is not in the mapping file", mappingFile, path.Base(f))
		}
	}
	return &c, nil
}

// lineEnds is a line's end with the carriage returns before it.
var lineEnds = regexp.MustCompile(`\r+\n`)

// Find returns the published log whose bytes are data, or nil: a user's
// copy of a shipped log is known by its content, whatever its name and
// its line ends (a log may end some lines in "\r\n" already, as ssh's
// notes on a terminal do, which a copy saved with "\r\n" may double).
func (c *Catalog) Find(data []byte) *PublishedLog {
	data = unixLines(data)
	for i := range c.Logs {
		if bytes.Equal(unixLines(c.Logs[i].Data), data) {
			return &c.Logs[i]
		}
	}
	return nil
}

// unixLines is b with its lines ended by "\n" alone; b itself where no
// carriage return is in it, which spares a user's log of 64 MiB the
// regular expression.
func unixLines(b []byte) []byte {
	if bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	return lineEnds.ReplaceAll(b, []byte("\n"))
}

// Parse parses the log and the collective the mapping file names for it
// (the published logs' headers name theirs in prose, which ParseLog does
// not read).
func (l *PublishedLog) Parse() (*calibrate.Log, Config, error) {
	lg, err := calibrate.ParseLog(l.File, l.Data)
	if err != nil {
		return nil, Config{}, err
	}
	op, err := ops.ParseOp(l.Op)
	if err != nil {
		return nil, Config{}, err
	}
	o, err := l.Options()
	if err != nil {
		return nil, Config{}, err
	}
	return lg, Config{Op: op, NCCL: o}, nil
}

// Options is the NCCL environment of the log's run that commsim
// reproduces: its NCCLEnv, and its NCCL version where the mapping file
// gives a release, stated or presumed.
func (l *PublishedLog) Options() (nccl.Options, error) {
	o, err := nccl.FromEnv(l.NCCLEnv)
	if err != nil {
		return o, err
	}
	stated := strings.HasPrefix(l.NCCLVersion, "2.")
	release := l.NCCLVersion
	switch {
	case stated && l.NCCLPresumed != "":
		return o, fmt.Errorf("%s: nccl_presumed %s beside the stated NCCL %s", l.File, l.NCCLPresumed, l.NCCLVersion)
	case !stated:
		release = l.NCCLPresumed
	}
	if release != "" {
		if o.Version, err = nccl.ParseVersion(release); err != nil {
			return o, fmt.Errorf("%s: %w", l.File, err)
		}
	}
	return o, nil
}

// The groups a shipped log counts in (PublishedLog.Group).
const (
	GroupTargets  = "targets"  // issue #16's logs: the pooled targets
	GroupHeldOut  = "held out" // found after the model was built
	GroupExcluded = "excluded" // ran with what commsim cannot reproduce
)

// Group is where the log's errors are pooled: excluded where it ran with
// what commsim cannot reproduce, held out where it was found after the
// model was built, and the targets otherwise.
func (l *PublishedLog) Group() string {
	switch {
	case l.Exclude != "":
		return GroupExcluded
	case l.HeldOut != "":
		return GroupHeldOut
	}
	return GroupTargets
}

// Preset is the preset Topo builds on: the spec up to its first override.
func (l *PublishedLog) Preset() string {
	name, _, _ := strings.Cut(l.Topo, ",")
	return strings.TrimSpace(name)
}

// Pool is the rows of the checked logs of one group, pooled: what the
// targets, and the runs held out of them, are measured by.
type Pool struct {
	Logs int
	Rows []Row
}

// Add pools one log's rows.
func (p *Pool) Add(rows []Row) {
	p.Logs++
	p.Rows = append(p.Rows, rows...)
}

// Priced is the pooled rows whose sizes NCCL's own cost model prices:
// the simulation's rows to set beside ModelRows(p.Rows).
func (p *Pool) Priced() []Row {
	var priced []Row
	for _, r := range p.Rows {
		if r.Priced() {
			priced = append(priced, r)
		}
	}
	return priced
}
