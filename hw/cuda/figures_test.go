//go:build linux || darwin

package cuda

import (
	"encoding/json"
	"maps"
	"os"
	"testing"
)

// envFigures names a file the GPU tests append their measurements to, one
// JSON object per line, for scripts/gpu-check.sh's summary.json. Figures
// are reported, never judged: a slow GPU does not fail a test.
const envFigures = "COMMSIM_FIGURES"

// recordFigure appends one measurement of kind, with t's name, to the
// figures file when COMMSIM_FIGURES names one. Failing to write it fails
// t: a check that loses its figures has not done its job.
func recordFigure(t testing.TB, kind string, fields map[string]any) {
	t.Helper()
	path := os.Getenv(envFigures)
	if path == "" {
		return
	}
	rec := map[string]any{"kind": kind, "test": t.Name()}
	maps.Copy(rec, fields)
	line, err := json.Marshal(rec)
	if err != nil {
		t.Errorf("figure %s: %v", kind, err)
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("figure %s: %v", kind, err)
		return
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Errorf("figure %s: %v", kind, err)
	}
}

func TestRecordFigure(t *testing.T) {
	path := t.TempDir() + "/figures.jsonl"
	t.Setenv(envFigures, path)
	recordFigure(t, "copy", map[string]any{"gbps": 4300.5})
	recordFigure(t, "equivalence", map[string]any{"cases": 4214, "failed": 0})
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"gbps":4300.5,"kind":"copy","test":"TestRecordFigure"}` + "\n" +
		`{"cases":4214,"failed":0,"kind":"equivalence","test":"TestRecordFigure"}` + "\n"
	if string(got) != want {
		t.Errorf("figures file:\n%s\nwant\n%s", got, want)
	}
}
