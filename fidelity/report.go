package fidelity

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable writes the report as a table, one size a line, then its
// summary as # comments: the form `commsim fidelity` prints and the test
// logs.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%12s %13s %14s %9s  %s\n", "size(B)", "measured(us)", "predicted(us)", "error(%)", "algo")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%12d %13.2f %14.2f %+9.2f  %s\n", row.Bytes, row.MeasuredUS, row.PredictedUS, 100*row.Error, row.Algo)
	}
	_, err := io.WriteString(w, r.Summary.Describe())
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
