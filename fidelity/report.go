package fidelity

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/commsim/commsim/calibrate"
)

// WriteTable writes the report as a table, one size a line, then its
// summary as # comments: the form `commsim fidelity` prints and the test
// logs.
//
// With NCCL's cost model priced (Algo nccl), two columns give its time and
// error beside the simulation's, and its summary follows commsim's. Where
// the log says what NCCL ran, a last column gives it, and a line counts
// the sizes where NCCL's tuner, as commsim models it, chose the same.
// A size held at the run's thread floor (Report.ThreadFloorUS) has
// "host-bound" after its algorithm.
func (r *Report) WriteTable(w io.Writer) error {
	// The table is made whole first, so that one write's error reports
	// it.
	var b strings.Builder
	model := r.Model.Sizes > 0
	ran := slices.ContainsFunc(r.Rows, func(row Row) bool { return row.Ran != "" })
	fmt.Fprintf(&b, "%12s %13s %14s %9s", "size(B)", "measured(us)", "predicted(us)", "error(%)")
	if model {
		fmt.Fprintf(&b, " %15s %15s", "nccl model(us)", "model error(%)")
	}
	if ran {
		fmt.Fprintf(&b, "  %-18s  %s\n", "algo", "nccl ran (its log)")
	} else {
		fmt.Fprintf(&b, "  %s\n", "algo")
	}
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%12d %13.2f %14.2f %+9.2f", row.Bytes, row.MeasuredUS, row.PredictedUS, 100*row.Error)
		switch {
		case model && row.Priced():
			fmt.Fprintf(&b, " %15.2f %+15.2f", row.ModelUS, 100*row.ModelError)
		case model:
			fmt.Fprintf(&b, " %15s %15s", "-", "-")
		}
		algo := row.Algo
		if row.HostBound {
			algo += " host-bound"
		}
		if ran {
			fmt.Fprintf(&b, "  %-18s  %s\n", algo, cmp.Or(row.Ran, "-"))
		} else {
			fmt.Fprintf(&b, "  %s\n", algo)
		}
	}
	b.WriteString(r.Summary.Describe() + r.Choices.Describe())
	if model {
		b.WriteString("# NCCL's own cost model (its tuner's time for what it would run; nothing simulated), for comparison:\n" +
			strings.ReplaceAll(r.Model.Describe(), "# ", "#   "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Describe is the summary as # comment lines: the median and largest
// absolute error, and each band's median.
func (s Summary) Describe() string {
	var b strings.Builder
	if s.Sizes == 0 {
		b.WriteString("# no sizes above 0 bytes\n")
		return b.String()
	}
	fmt.Fprintf(&b, "# |error|: median %.1f%% over %d sizes, max %.1f%% at %d bytes\n", 100*s.Median, s.Sizes, 100*s.Max, s.MaxBytes)
	var bands []string
	for _, bs := range s.Bands {
		if bs.Sizes == 0 {
			bands = append(bands, fmt.Sprintf("%s: no sizes", bs.Band.Name))
			continue
		}
		bands = append(bands, fmt.Sprintf("%s: %.1f%% (%d sizes)", bs.Band.Name, 100*bs.Median, bs.Sizes))
	}
	fmt.Fprintf(&b, "# median |error| by size: %s\n", strings.Join(bands, "; "))
	return b.String()
}

// Describe is a # comment line on NCCL's choices, "" where the log says
// none: at how many sizes NCCL's tuner chose what NCCL ran, and which the
// simulation ran; then one on the tuning lines that could not be read,
// where any could not.
func (c Choices) Describe() string {
	unread := calibrate.DescribeUnread(c.Unread)
	if c.Logged+c.Varied == 0 {
		return unread
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# NCCL's logged choice: the tuner chose the same algorithm and protocol at %d of %d sizes", c.Agree, c.Logged)
	if c.Varied > 0 {
		fmt.Fprintf(&b, " (%d more whose lines disagree left out)", c.Varied)
	}
	if c.AsLogged {
		b.WriteString("; simulated as logged")
	}
	b.WriteString("\n" + unread)
	return b.String()
}
