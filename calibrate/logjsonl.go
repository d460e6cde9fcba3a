package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// commsim bench's --format json: a JSON object a line, one a size, with
// the fields of its CSV (op, algo, ranks, dtype, bytes, time_us,
// gpus_per_thread, iters, …), read as that CSV is.
type benchRecord struct {
	Op            string           `json:"op"`
	Algo          string           `json:"algo"`
	Ranks         *int             `json:"ranks"`
	DType         string           `json:"dtype"`
	Bytes         *json.Number     `json:"bytes"`
	TimeUS        *json.Number     `json:"time_us"`
	GPUsPerThread *int             `json:"gpus_per_thread"`
	Iters         *int             `json:"iters"`
	Results       *json.RawMessage `json:"results"` // nccl-tests' report has them; a record has not
}

// isJSONLines reports whether data's first line is one of bench's JSON
// records: an object with bytes and time_us and no nccl-tests results.
func isJSONLines(data []byte) bool {
	first, _, _ := bytes.Cut(bytes.TrimLeft(data, " \t\r\n"), []byte("\n"))
	var rec benchRecord
	return json.Unmarshal(first, &rec) == nil && rec.Bytes != nil && rec.TimeUS != nil && rec.Results == nil
}

// parseJSONLines reads bench's JSON records into lg, each as the CSV row
// of the same fields.
func parseJSONLines(name string, data []byte, lg *Log) error {
	lg.Format = "commsim json lines"
	cols := map[string]int{"size": 0, "time": 1, "op": 2, "ranks": 3, "type": 4, "gpus": 5, "iters": 6, "algo": 7}
	itoa := func(n *int) string { // a field left out reads as an empty cell
		if n == nil {
			return ""
		}
		return strconv.Itoa(*n)
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		fail := func(reason string) error {
			return &LogError{Name: name, Line: i + 1, Reason: reason, Text: shortLine(string(line))}
		}
		var rec benchRecord
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil {
			return fail(fmt.Sprintf("not one of commsim's JSON records (%v)", err))
		}
		if dec.More() {
			return fail("more after the record: one JSON object a line")
		}
		if rec.Bytes == nil || rec.TimeUS == nil {
			return fail("a record without bytes and time_us")
		}
		r, msg := lg.csvRow([]string{rec.Bytes.String(), rec.TimeUS.String(), rec.Op, itoa(rec.Ranks), rec.DType, itoa(rec.GPUsPerThread), itoa(rec.Iters), rec.Algo}, cols)
		if msg == "" {
			msg = lg.add(r, i+1)
		}
		if msg != "" {
			return fail(msg)
		}
	}
	if lg.Iters == 0 {
		lg.Iters = 1 // iters is left out at 1 run a size
	}
	return nil
}
