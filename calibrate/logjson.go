package calibrate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// LatestJSONLayout is the newest layout version of nccl-tests' JSON
// report that commsim knows; a newer one is read for the same keys.
const LatestJSONLayout = 3

// nccl-tests' JSON report (-J FILE, nccl-tests 2.17 on; versions 1 to 3
// of its layout): one object whose "results" list holds a record per
// size (size, count, type, redop, root, and out_of_place and in_place
// objects with time or cpu_time, alg_bw, bus_bw and nwrong), beside the
// command line ("args"), the whole environment ("env"), "nccl_version"
// as NCCL_VERSION_CODE, the "config" (ngpus and nthreads per process)
// with its "devices" (one line per process). A run that died mid-sweep
// leaves the document unfinished: nccl-tests calls it partial output,
// and its finished records are kept. commsim bench -J writes the same
// layout, naming the collective in a "commsim" object.
type jsonRecord struct {
	Size       json.RawMessage `json:"size"`
	Count      json.RawMessage `json:"count"`
	Type       string          `json:"type"`
	Redop      string          `json:"redop"`
	Root       json.RawMessage `json:"root"`
	OutOfPlace *jsonTiming     `json:"out_of_place"`
	InPlace    *jsonTiming     `json:"in_place"`
}

// jsonTiming holds the time as written: a number, or nccl-tests'
// "nan" string; and the count of wrong elements, null where unchecked.
type jsonTiming struct {
	Time    json.RawMessage `json:"time"`
	CPUTime json.RawMessage `json:"cpu_time"`
	NWrong  json.RawMessage `json:"nwrong"`
}

// isJSON reports whether data is a JSON document rather than text.
func isJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// parseJSONLog reads nccl-tests' JSON report into lg.
func parseJSONLog(name string, data []byte, lg *Log) error {
	lg.Format = "nccl-tests json"
	r := jsonReader{name: name, data: data, lg: lg, dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	if err := r.readReport(); err != nil {
		return err
	}
	c := r.config
	if len(r.args) > 0 {
		if m := perfRE.FindStringSubmatch(path.Base(r.args[0])); m != nil {
			lg.Op = testOps[m[1]]
		}
	}
	lg.Op = cmp.Or(lg.Op, r.commsim.Op)
	for _, kv := range r.env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
			lg.setNCCLEnv(k, v)
		}
	}
	if r.code > 0 {
		lg.NCCLVersion = versionOfCode(r.code)
	}
	lg.Iters = itersTimes(strconv.Itoa(c.Iters), strconv.Itoa(max(c.Agg, 1)))
	// Each process's threads drive its GPUs.
	if len(c.Devices) == 0 {
		return nil
	}
	ranks := int64(len(c.Devices))
	lg.GPUsPerThread = c.GPUs
	for _, n := range []int{c.GPUs, max(1, c.Threads)} {
		if n <= 0 || ranks > math.MaxInt32/int64(n) {
			return &LogError{Name: name, Reason: fmt.Sprintf("not nccl-tests JSON: config's %d devices of %d GPUs and %d threads are not a number of ranks", len(c.Devices), c.GPUs, c.Threads)}
		}
		ranks *= int64(n)
	}
	lg.Ranks = int(ranks)
	return nil
}

// jsonReader reads a JSON report a key at a time: what it found, and
// where.
type jsonReader struct {
	name    string
	data    []byte
	lg      *Log
	dec     *json.Decoder
	args    []string
	env     []string
	code    int
	commsim struct{ Op string } // commsim bench -J's own key
	config  struct {
		GPUs    int               `json:"ngpus"`
		Threads int               `json:"nthreads"`
		Iters   int               `json:"iterations"`
		Agg     int               `json:"aggregated_iterations"`
		Devices []json.RawMessage `json:"devices"` // a line per process
	}
}

// fail is a LogError at byte off, quoting the report from there.
func (r *jsonReader) fail(off int64, reason string) error {
	off = min(max(off, 0), int64(len(r.data)))
	line := bytes.Count(r.data[:off], []byte("\n")) + 1
	text, _, _ := strings.Cut(string(r.data[off:]), "\n")
	return &LogError{Name: r.name, Line: line, Reason: reason, Text: shortLine(text)}
}

// typeFail is a LogError at byte off for a value of the wrong JSON type:
// what names typ's field (else fallback) and what the report holds there.
func (r *jsonReader) typeFail(off int64, prefix, fallback string, typ *json.UnmarshalTypeError) error {
	return r.fail(off, fmt.Sprintf("not nccl-tests JSON: %s%s is a JSON %s, want %s", prefix, cmp.Or(typ.Field, fallback), typ.Value, jsonKind(typ.Type)))
}

// next is the offset of the decoder's next value (past blanks and a
// comma, or the colon after a key).
func (r *jsonReader) next() int64 {
	off := r.dec.InputOffset()
	return off + int64(len(r.data[off:])-len(bytes.TrimLeft(r.data[off:], " \t\r\n,:")))
}

// readReport reads the report's keys. A report that ends early after at
// least one record (partial output) is read as far as it goes.
func (r *jsonReader) readReport() error {
	if tok, err := r.dec.Token(); err != nil {
		return r.broken("", err)
	} else if tok != json.Delim('{') {
		return r.fail(0, "not nccl-tests JSON: want an object")
	}
	if off, key := repeatedKey(r.data); off >= 0 {
		// JSON leaves a repeated key's meaning open: two "results" would
		// merge two runs' records, two "ngpus" pick one silently.
		return r.fail(off, fmt.Sprintf("not nccl-tests JSON: an object has %q twice", key))
	}
	for r.dec.More() {
		start := r.next()
		tok, err := r.dec.Token()
		if err != nil {
			return r.broken("", err)
		}
		key, _ := tok.(string)
		var v any = new(json.RawMessage) // what the report holds besides
		switch key {
		case "results":
			if err := r.readRecords(); err != nil {
				return r.broken("a record of results", err)
			}
			continue
		case "args":
			v = &r.args
		case "env":
			v = &r.env
		case "version":
			v = &r.lg.JSONLayout
		case "nccl_version":
			v = &r.code
		case "config":
			v = &r.config
		case "commsim":
			v = &r.commsim
		}
		if err := r.dec.Decode(v); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				return r.typeFail(start, "", key, typ)
			}
			return r.broken(key, err)
		}
		if key == "nccl_version" && r.code < 0 {
			return r.fail(start, fmt.Sprintf("not nccl-tests JSON: nccl_version %d, want NCCL_VERSION_CODE (22703 for 2.27.3)", r.code))
		}
		if key == "version" && r.lg.JSONLayout < 1 {
			return r.fail(start, fmt.Sprintf("not nccl-tests JSON: layout version %d, want 1 or more", r.lg.JSONLayout))
		}
	}
	if _, err := r.dec.Token(); err != nil { // the report's end
		return r.broken("", err)
	}
	if off := r.next(); off < int64(len(r.data)) {
		return r.fail(off, "not nccl-tests JSON: more after the report's end")
	}
	return nil
}

// repeatedKey finds the first key that an object of data, at any depth,
// holds twice: the offset of its second one, and the key; -1 where none
// does before the data ends or breaks (the reader reports those).
func repeatedKey(data []byte) (int64, string) {
	type level struct {
		keys map[string]bool // nil in an array
		key  bool            // an object's next token is a key
	}
	var stack []level
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].key = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return -1, ""
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, level{keys: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, level{})
			default:
				stack = stack[:top]
				valueDone()
			}
		case string:
			if top >= 0 && stack[top].key {
				if stack[top].keys[t] {
					end := dec.InputOffset()
					return int64(max(bytes.LastIndexByte(data[:max(end-1, 0)], '"'), 0)), t
				}
				stack[top].keys[t], stack[top].key = true, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// broken turns a decoding error into a LogError; nil where the report
// ends early after at least one record (partial output).
func (r *jsonReader) broken(key string, err error) error {
	var le *LogError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &le):
		return le
	case (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && len(r.lg.Samples) > 0:
		r.lg.Partial = true
		return nil
	case errors.As(err, &syn):
		return r.fail(syn.Offset, "not nccl-tests JSON: "+syn.Error())
	case errors.As(err, &typ):
		return r.typeFail(r.dec.InputOffset(), "", key, typ)
	}
	return r.fail(r.dec.InputOffset(), "not nccl-tests JSON: "+err.Error())
}

// readRecords reads the "results" list, a record at a time so that an
// error names the record (nccl-tests writes its report on one line) and
// a truncated list keeps the records before it.
func (r *jsonReader) readRecords() error {
	at := r.next()
	if tok, err := r.dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('[') {
		return r.fail(at, "not nccl-tests JSON: results is not a list")
	}
	for i := 0; r.dec.More(); i++ {
		start := r.next()
		var rec jsonRecord
		if err := r.dec.Decode(&rec); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				return r.typeFail(start, fmt.Sprintf("results[%d]: ", i), "the record", typ)
			}
			return err
		}
		row, inPlace, msg := rec.row()
		if inPlace {
			r.lg.InPlaceOnly++
		}
		if msg == "" {
			msg = r.lg.add(row, bytes.Count(r.data[:start], []byte("\n"))+1)
		}
		if msg != "" {
			err := r.fail(start, fmt.Sprintf("results[%d]: %s", i, msg)).(*LogError)
			// The record, on one line: a report written with one key a
			// line would otherwise show its opening brace alone.
			var one bytes.Buffer
			if json.Compact(&one, r.data[start:r.dec.InputOffset()]) == nil {
				err.Text = shortLine(one.String())
			}
			return err
		}
	}
	_, err := r.dec.Token() // the list's end
	return err
}

// row is the record's size and out-of-place time (the in-place one
// where a run wrote no out-of-place result, as a trace replay does),
// with its count, type, redop and wrong elements.
func (r jsonRecord) row() (row row, inPlace bool, msg string) {
	if r.Size == nil {
		return row, false, "a result without a size"
	}
	t := r.OutOfPlace
	if t == nil {
		t, inPlace = r.InPlace, true
	}
	if t == nil {
		return row, false, "a result without a time (out_of_place and in_place are both null)"
	}
	time := t.Time
	if time == nil {
		time = t.CPUTime
	}
	row.Sample, msg = sizeTime(strings.Trim(string(r.Size), `"`), strings.Trim(string(time), `"`))
	// As a table's row has them: a count of 0 or more, a redop of
	// nccl-tests', a root that is a rank or -1; left out, none.
	if count := strings.Trim(string(r.Count), `" `); count != "" && count != "null" {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 0 {
			return row, false, fmt.Sprintf("count %s is no element count", r.Count)
		}
		row.Count = n
	}
	row.typ, row.redop = r.Type, strings.ToLower(strings.TrimSpace(r.Redop))
	if row.redop != "" && !slices.Contains(redopNames, row.redop) {
		return row, false, fmt.Sprintf("redop %q is none of nccl-tests' (%s)", r.Redop, strings.Join(redopNames, ", "))
	}
	if root := strings.Trim(string(r.Root), `" `); root != "" && root != "null" {
		n, err := strconv.Atoi(root) // nccl-tests writes it as a padded string, "    -1"
		if err != nil || n < -1 {
			return row, false, fmt.Sprintf("root %s is no rank (nccl-tests writes -1 where there is none)", r.Root)
		}
		row.root, row.hasRoot = n, true
	}
	for _, half := range []*jsonTiming{r.OutOfPlace, r.InPlace} {
		if half != nil {
			if n, err := strconv.ParseInt(string(half.NWrong), 10, 64); err == nil && n > 0 {
				row.wrong += n
			}
		}
	}
	return row, inPlace, msg
}

// jsonKind names what JSON value decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a whole number"
}
