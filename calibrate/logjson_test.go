package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
)

// ncclTestsJSON is a report in nccl-tests' JSON layout (-J, version 3):
// two processes of 4 GPUs each, NCCL 2.27.3, NCCL_PROTO set, records with
// nccl-tests' values (six decimals, a root string, nwrong null without
// -c). It is spread over lines for the tests' line numbers; nccl-tests
// writes it on one (see compact).
func ncclTestsJSON(records ...string) string {
	return `{
  "version": 3,
  "start_time": "2026-11-30 10:00:00",
  "args": ["/opt/nccl-tests/build/all_gather_perf", "-b", "1K", "-e", "2K", "-g", "4", "-J", "ag.json"],
  "env": ["PATH=/usr/bin", "NCCL_PROTO=Simple", "NCCL_DEBUG=INFO", "HOME=/root"],
  "nccl_version": 22703,
  "config": {"nthreads": 1, "ngpus": 4, "minimum_bytes": 1024, "maximum_bytes": 2048, "step_factor": 2,
    "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1, "validation": 0, "graph": 0,
    "blocking_collectives": false, "parallel_init": false,
    "devices": [
      {"rank": 0, "group": 0, "pid": 100, "hostname": "node01", "device": 0, "device_hex": "0x18", "device_info": "NVIDIA H100 80GB HBM3"},
      {"rank": 4, "group": 0, "pid": 200, "hostname": "node02", "device": 0, "device_hex": "0x18", "device_info": "NVIDIA H100 80GB HBM3"}
    ]},
  "results": [
` + strings.Join(records, ",\n") + `
  ],
  "out_of_bounds": {"count": 0, "okay": true},
  "average_bus_bandwidth": {"bandwidth": 1.234000, "okay": "unchecked"},
  "end_time": "2026-11-30 10:00:05"
}
`
}

const (
	jsonRecord2K = `    {"size": 2048, "count": 64, "type": "float", "redop": "none", "root": "    -1",
      "out_of_place": {"time": 12.500000, "alg_bw": 0.160000, "bus_bw": 0.140000, "nwrong": null},
      "in_place": {"time": 12.100000, "alg_bw": 0.170000, "bus_bw": 0.150000, "nwrong": null},
      "actual_iterations": 20, "experiment_name": ""}`
	jsonRecord1K = `    {"size": 1024, "count": 32, "type": "float", "redop": "none", "root": "    -1",
      "out_of_place": {"time": 11.000000, "alg_bw": 0.090000, "bus_bw": 0.080000, "nwrong": null},
      "in_place": {"time": 10.900000, "alg_bw": 0.090000, "bus_bw": 0.080000, "nwrong": null},
      "actual_iterations": 20, "experiment_name": ""}`
)

func TestParseLogReadsNCCLTestsJSON(t *testing.T) {
	lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord2K, jsonRecord1K)))
	if err != nil {
		t.Fatal(err)
	}
	if lg.Format != "nccl-tests json" || lg.Op != "allgather" || lg.Ranks != 8 || lg.Type != "float" || lg.NCCLVersion != "2.27.3" ||
		!lg.HasRoot || lg.Root != -1 || lg.JSONLayout != 3 {
		t.Errorf("%+v: want nccl-tests json (layout 3), allgather on 8 ranks of float, NCCL 2.27.3, root -1", lg)
	}
	rooted, err := ParseLog("bc.json", []byte(ncclTestsJSON(strings.Replace(jsonRecord1K, `"root": "    -1"`, `"root": "     2"`, 1))))
	if err != nil || !rooted.HasRoot || rooted.Root != 2 {
		t.Errorf("%+v, %v: want root 2, as the record's padded string says", rooted, err)
	}
	// Sorted by size, the out-of-place time, each with its record's line.
	if len(lg.Samples) != 2 || lg.Samples[0] != (Sample{1024, 11, 19, 32}) || lg.Samples[1] != (Sample{2048, 12.5, 15, 64}) {
		t.Errorf("samples %+v", lg.Samples)
	}
	run, stated, err := lg.NCCLOptions()
	if err != nil || !stated || run.Env["NCCL_PROTO"] != "Simple" || run.Options.Version != nccl.Version(227) ||
		len(run.Ignored) != 1 || run.Ignored[0] != "NCCL_DEBUG=INFO" {
		t.Errorf("NCCL environment %+v (stated %v, %v): want NCCL_PROTO=Simple on 2.27, NCCL_DEBUG ignored", run, stated, err)
	}
}

// compact is doc on one line, as nccl-tests writes its report.
func compact(t *testing.T, doc string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A run that died mid-sweep leaves an unfinished document: the records
// it finished are read, as nccl-tests' "partial output" (Log.Partial), and what came
// before them (the collective, the ranks, NCCL's version and
// environment) is kept.
func TestParseLogKeepsPartialJSON(t *testing.T) {
	for _, doc := range []string{ncclTestsJSON(jsonRecord1K, jsonRecord2K), compact(t, ncclTestsJSON(jsonRecord1K, jsonRecord2K))} {
		cut := strings.Index(doc, `"size": 2048`) + 20
		if cut < 20 {
			cut = strings.Index(doc, `"size":2048`) + 20
		}
		lg, err := ParseLog("ag.json", []byte(doc[:cut]))
		if err != nil {
			t.Fatal(err)
		}
		if len(lg.Samples) != 1 || lg.Samples[0].Bytes != 1024 || lg.Op != "allgather" || lg.Ranks != 8 ||
			lg.NCCLVersion != "2.27.3" || lg.NCCLEnv["NCCL_PROTO"] != "Simple" || !lg.Partial {
			t.Errorf("%+v: want the one finished record, marked partial, and the report's collective, ranks and NCCL", lg)
		}
	}
	if lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord1K, jsonRecord2K))); err != nil || lg.Partial {
		t.Errorf("a whole report: %v, partial %v", err, lg != nil && lg.Partial)
	}
}

// A record with no out-of-place result (a trace replay's) is read at
// its in-place time, and counted so the caller can say so.
func TestParseLogCountsInPlaceOnlyRecords(t *testing.T) {
	inPlaceOnly := strings.Replace(jsonRecord2K, `"out_of_place": {`, `"out_of_place": null, "x": {`, 1)
	lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord1K, inPlaceOnly)))
	if err != nil || lg.InPlaceOnly != 1 || len(lg.Samples) != 2 || lg.Samples[0].TimeUS != 11 {
		t.Errorf("%+v, %v: want two sizes, one of them in place", lg, err)
	}
	if lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord1K, jsonRecord2K))); err != nil || lg.InPlaceOnly != 0 {
		t.Errorf("a whole report: %v, %d sizes in place", err, lg.InPlaceOnly)
	}
}

// On one line, as nccl-tests writes it, an error names the record and
// quotes the report from it.
// A record whose results were checked wrong (nwrong above 0) is counted.
func TestParseLogCountsWrongJSONRecords(t *testing.T) {
	lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord1K, strings.Replace(jsonRecord2K, `"nwrong": null},
      "in_place"`, `"nwrong": 2},
      "in_place"`, 1))))
	if err != nil || lg.WrongRows != 1 || lg.FirstWrong != 19 {
		t.Errorf("%+v, %v: want one record with wrong elements, on line 19", lg, err)
	}
}

func TestParseLogJSONOnOneLine(t *testing.T) {
	doc := compact(t, ncclTestsJSON(jsonRecord1K, strings.Replace(jsonRecord2K, `"time": 12.500000`, `"time": -1`, 1)))
	_, err := ParseLog("ag.json", []byte(doc))
	if err == nil || !strings.HasPrefix(err.Error(), `ag.json:1: results[1]: want a size >= 0 and a time from 1e-6 µs to 9.2e12 µs, the simulator's 1 ps to its horizon of 106 days (or 0 for size 0): `+"`"+`{"size":2048,"count":64,`) {
		t.Errorf("%v", err)
	}
	lg, err := ParseLog("ag.json", []byte(compact(t, ncclTestsJSON(jsonRecord2K, jsonRecord1K))))
	if err != nil || len(lg.Samples) != 2 || lg.Ranks != 8 {
		t.Errorf("%+v, %v", lg, err)
	}
}

// Each bad report is a *LogError naming the line at fault.
func TestParseLogJSONErrorsNameTheLine(t *testing.T) {
	nan := strings.Replace(jsonRecord2K, `"time": 12.500000`, `"time": "nan"`, 1)
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"nan time", ncclTestsJSON(jsonRecord1K, nan), 19, `ag.json:19: results[1]: want a size >= 0 and a time from 1e-6 µs to 9.2e12 µs, the simulator's 1 ps to its horizon of 106 days (or 0 for size 0): ` + "`" + `{"size":2048,"count":64,"type":"float"`},
		{"no time", ncclTestsJSON(strings.NewReplacer(`"out_of_place": {`, `"out_of_place": null, "x": {`, `"in_place": {`, `"in_place": null, "y": {`).Replace(jsonRecord1K)),
			15, `ag.json:15: results[0]: a result without a time`},
		{"negative size", ncclTestsJSON(strings.Replace(jsonRecord1K, "1024", "-1024", 1)), 15, `ag.json:15: results[0]: want a size >= 0`},
		{"huge size", ncclTestsJSON(strings.Replace(jsonRecord1K, "1024", "18446744073709551615", 1)), 15, `is not a byte count`},
		{"mixed types", ncclTestsJSON(jsonRecord1K, strings.Replace(jsonRecord2K, "float", "half", 1)), 19, `ag.json:19: results[1]: type half after float`},
		{"a count of another collective", ncclTestsJSON(jsonRecord1K, strings.Replace(jsonRecord2K, `"count": 64`, `"count": 512`, 1)), 19,
			`ag.json:19: results[1]: 4 bytes a counted element (size/count), where line 15's row has 32: a row of another collective`},
		{"a collective that reduces after one that does not", ncclTestsJSON(jsonRecord1K, strings.Replace(jsonRecord2K, `"redop": "none"`, `"redop": "sum"`, 1)), 19,
			`ag.json:19: results[1]: redop sum after rows of redop none`},
		{"negative count", ncclTestsJSON(strings.Replace(jsonRecord1K, `"count": 32`, `"count": -1`, 1)), 15, `ag.json:15: results[0]: count -1 is no element count`},
		{"unknown redop", ncclTestsJSON(strings.Replace(jsonRecord1K, `"redop": "none"`, `"redop": "foo"`, 1)), 15, `ag.json:15: results[0]: redop "foo" is none of nccl-tests'`},
		{"root a word", ncclTestsJSON(strings.Replace(jsonRecord1K, `"root": "    -1"`, `"root": "abc"`, 1)), 15, `ag.json:15: results[0]: root "abc" is no rank`},
		{"negative version", strings.Replace(ncclTestsJSON(jsonRecord1K), `"nccl_version": 22703`, `"nccl_version": -1`, 1), 6, `ag.json:6: not nccl-tests JSON: nccl_version -1, want NCCL_VERSION_CODE`},
		{"syntax", strings.Replace(ncclTestsJSON(jsonRecord1K), `"ngpus": 4,`, `"ngpus": 4,,`, 1), 7, `ag.json:7: not nccl-tests JSON: invalid character ','`},
		{"wrong type", strings.Replace(ncclTestsJSON(jsonRecord1K), `"nccl_version": 22703`, `"nccl_version": "2.27"`, 1), 6, `ag.json:6: not nccl-tests JSON: nccl_version is a JSON string, want a whole number`},
		{"config a list", strings.Replace(ncclTestsJSON(jsonRecord1K), `"config": {`, `"config": [], "x": {`, 1), 7, `not nccl-tests JSON: config is a JSON array, want an object`},
		{"record not an object", strings.Replace(ncclTestsJSON(jsonRecord1K), `"results": [`, `"results": [7, `, 1), 14, `not nccl-tests JSON: results[0]: the record is a JSON number, want an object`},
		{"size a word", ncclTestsJSON(strings.Replace(jsonRecord1K, `"size": 1024`, `"size": "big"`, 1)), 15, `ag.json:15: results[0]: size "big" is not a byte count`},
		{"results not a list", strings.Replace(ncclTestsJSON(jsonRecord1K), `"results": [`, `"results": {"a": [`, 1), 14, `ag.json:14: not nccl-tests JSON: results is not a list: ` + "`" + `{"a": [` + "`"},
		{"more after the end", ncclTestsJSON(jsonRecord1K) + "{}\n", 24, `ag.json:24: not nccl-tests JSON: more after the report's end: "{}"`},
		{"ranks past counting", strings.Replace(ncclTestsJSON(jsonRecord1K), `"ngpus": 4`, `"ngpus": 4611686018427387904`, 1), 0, `config's 2 devices of 4611686018427387904 GPUs and 1 threads are not a number of ranks`},
		{"cut before a record", ncclTestsJSON()[:200], 0, `not nccl-tests JSON: unexpected EOF`},
		{"no records", ncclTestsJSON(), 0, "ag.json: no result rows"},
		{"second results", strings.Replace(ncclTestsJSON(jsonRecord1K), `  "out_of_bounds"`, "  \"results\": [\n"+jsonRecord2K+"],\n  \"out_of_bounds\"", 1), 20,
			`ag.json:20: not nccl-tests JSON: an object has "results" twice`},
		{"second args", strings.Replace(ncclTestsJSON(jsonRecord1K), `  "env"`, `  "args": [], "env"`, 1), 5, `ag.json:5: not nccl-tests JSON: an object has "args" twice`},
		{"second time", ncclTestsJSON(strings.Replace(jsonRecord1K, `"time": 11.000000,`, `"time": 11.000000, "time": 1,`, 1)), 16,
			`ag.json:16: not nccl-tests JSON: an object has "time" twice`},
		{"layout version 0", strings.Replace(ncclTestsJSON(jsonRecord1K), `"version": 3`, `"version": 0`, 1), 2, `ag.json:2: not nccl-tests JSON: layout version 0, want 1 or more`},
		{"layout version a word", strings.Replace(ncclTestsJSON(jsonRecord1K), `"version": 3`, `"version": "3"`, 1), 2, `ag.json:2: not nccl-tests JSON: version is a JSON string, want a whole number`},
		{"second ngpus", strings.Replace(ncclTestsJSON(jsonRecord1K), `"ngpus": 4,`, `"ngpus": 4, "ngpus": 1,`, 1), 7, `not nccl-tests JSON: an object has "ngpus" twice`},
	} {
		_, err := ParseLog("ag.json", []byte(c.text))
		var le *LogError
		if !errors.As(err, &le) || (c.line > 0 && le.Line != c.line) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v (line %v), want line %d and %q", c.name, err, le, c.line, c.want)
		}
	}
}

// A JSON timing with both time and cpu_time is read at its time (the
// GPU's), not the host's.
func TestParseLogJSONPrefersTimeToCPUTime(t *testing.T) {
	both := strings.Replace(jsonRecord1K, `"time": 11.000000,`, `"time": 11.000000, "cpu_time": 30.000000,`, 1)
	cpuOnly := strings.Replace(jsonRecord1K, `"time": 11.000000,`, `"cpu_time": 30.000000,`, 1)
	for _, c := range []struct {
		name, record string
		want         float64
	}{
		{"both", both, 11},
		{"cpu_time only", cpuOnly, 30},
	} {
		lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(c.record)))
		if err != nil || len(lg.Samples) != 1 || lg.Samples[0].TimeUS != c.want {
			t.Errorf("%s: %+v, %v; want %g µs", c.name, lg, err, c.want)
		}
	}
}

// The ranks of a JSON report are its processes (devices) × GPUs per
// thread × threads per process; nthreads 0 (absent) counts as one.
func TestParseLogJSONCountsThreads(t *testing.T) {
	for _, c := range []struct {
		threads string
		ranks   int
	}{
		{`"nthreads": 1`, 8},
		{`"nthreads": 2`, 16},
		{`"nthreads": 0`, 8},
	} {
		doc := strings.Replace(ncclTestsJSON(jsonRecord1K), `"nthreads": 1`, c.threads, 1)
		lg, err := ParseLog("ag.json", []byte(doc))
		if err != nil || lg.Ranks != c.ranks {
			t.Errorf("%s: %+v, %v; want %d ranks", c.threads, lg, err, c.ranks)
		}
	}
}

// A record whose in-place result alone was checked wrong is counted as
// one whose out-of-place result was.
func TestParseLogCountsInPlaceWrongJSONRecords(t *testing.T) {
	wrong := strings.Replace(jsonRecord2K, `"bus_bw": 0.150000, "nwrong": null`, `"bus_bw": 0.150000, "nwrong": 5`, 1)
	lg, err := ParseLog("ag.json", []byte(ncclTestsJSON(jsonRecord1K, wrong)))
	if err != nil || lg.WrongRows != 1 || lg.FirstWrong != 19 {
		t.Errorf("%+v, %v: want one record with wrong elements, on line 19", lg, err)
	}
}
