package calibrate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"reflect"
	"strings"
)

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
	Type       string          `json:"type"`
	OutOfPlace *jsonTiming     `json:"out_of_place"`
	InPlace    *jsonTiming     `json:"in_place"`
}

// jsonTiming holds the time as written: a number, or nccl-tests'
// "nan" string.
type jsonTiming struct {
	Time    json.RawMessage `json:"time"`
	CPUTime json.RawMessage `json:"cpu_time"`
}

// isJSON reports whether data is a JSON document rather than text.
func isJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// parseJSONLog reads nccl-tests' JSON report into lg.
func parseJSONLog(name string, data []byte, lg *Log) error {
	lg.Format = "nccl-tests json"
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	fail := func(off int64, reason string) error {
		line, text := lineAt(data, off)
		return &LogError{Name: name, Line: line, Reason: reason, Text: text}
	}
	// broken turns a decoding error into a LogError; nil where the
	// document ends early after at least one record (partial output).
	broken := func(key string, err error) error {
		var le *LogError
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &le):
			return le
		case (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && len(lg.Samples) > 0:
			return nil
		case errors.As(err, &syn):
			return fail(syn.Offset, "not nccl-tests JSON: "+syn.Error())
		case errors.As(err, &typ):
			return fail(dec.InputOffset(), fmt.Sprintf("not nccl-tests JSON: %s is a JSON %s, want %s", cmp.Or(typ.Field, key), typ.Value, jsonKind(typ.Type)))
		}
		return fail(dec.InputOffset(), "not nccl-tests JSON: "+err.Error())
	}
	if tok, err := dec.Token(); err != nil {
		return broken("", err)
	} else if tok != json.Delim('{') {
		return fail(0, "not nccl-tests JSON: want an object")
	}
	var args, env []string
	var code int
	var commsim struct{ Op string } // commsim bench -J's own key
	var config struct {
		GPUs    int               `json:"ngpus"`
		Threads int               `json:"nthreads"`
		Devices []json.RawMessage `json:"devices"` // a line per process
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return broken("", err)
		}
		key, _ := tok.(string)
		var v any = new(json.RawMessage) // what the report holds besides
		switch key {
		case "results":
			if err := lg.readJSONRecords(dec, data, fail); err != nil {
				return broken("a record of results", err)
			}
			continue
		case "args":
			v = &args
		case "env":
			v = &env
		case "nccl_version":
			v = &code
		case "config":
			v = &config
		case "commsim":
			v = &commsim
		}
		if err := dec.Decode(v); err != nil {
			return broken(key, err)
		}
	}
	if len(args) > 0 {
		if m := perfRE.FindStringSubmatch(path.Base(args[0])); m != nil {
			lg.Op = testOps[m[1]]
		}
	}
	lg.Op = cmp.Or(lg.Op, commsim.Op)
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
			lg.setNCCLEnv(k, v)
		}
	}
	if code > 0 {
		lg.NCCLVersion = versionOfCode(code)
	}
	if len(config.Devices) > 0 && config.GPUs > 0 {
		// Each process's threads drive its GPUs.
		lg.Ranks = len(config.Devices) * config.GPUs * max(1, config.Threads)
	}
	return nil
}

// readJSONRecords reads the "results" list, a record at a time so that
// an error names the record's line and a truncated list keeps the
// records before it.
func (lg *Log) readJSONRecords(dec *json.Decoder, data []byte, fail func(int64, string) error) error {
	if tok, err := dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('[') {
		return fail(dec.InputOffset(), "not nccl-tests JSON: results is not a list")
	}
	for dec.More() {
		start := dec.InputOffset()
		start += int64(len(data[start:]) - len(bytes.TrimLeft(data[start:], " \t\r\n,")))
		var r jsonRecord
		if err := dec.Decode(&r); err != nil {
			return err
		}
		s, msg := r.sample()
		if msg == "" && r.Type != "" && lg.Type != "" && r.Type != lg.Type {
			msg = fmt.Sprintf("type %s after %s: calibrate one type per log", r.Type, lg.Type)
		}
		if msg != "" {
			return fail(start, msg)
		}
		s.Line, _ = lineAt(data, start)
		lg.Type = cmp.Or(lg.Type, r.Type)
		lg.Samples = append(lg.Samples, s)
	}
	_, err := dec.Token() // the list's end
	return err
}

// sample is the record's size and out-of-place time (the in-place one
// where a run wrote no out-of-place result, as a trace replay does).
func (r jsonRecord) sample() (s Sample, msg string) {
	if r.Size == nil {
		return s, "a result without a size"
	}
	t := r.OutOfPlace
	if t == nil {
		t = r.InPlace
	}
	if t == nil {
		return s, "a result without a time (out_of_place and in_place are both null)"
	}
	time := t.Time
	if time == nil {
		time = t.CPUTime
	}
	s, msg = sizeTime(strings.Trim(string(r.Size), `"`), strings.Trim(string(time), `"`))
	if msg == "" && !s.valid() {
		msg = invalidSample
	}
	return s, msg
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
	}
	return "a number"
}

// lineAt is the 1-based line holding byte off of data, and its text.
func lineAt(data []byte, off int64) (int, string) {
	off = min(max(off, 0), int64(len(data)))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	end := bytes.IndexByte(data[off:], '\n')
	if end < 0 {
		end = len(data) - int(off)
	}
	return bytes.Count(data[:off], []byte("\n")) + 1, shortLine(string(data[start : int(off)+end]))
}
