package calibrate

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// commsim bench's JSON records read as its CSV of the same sizes does: the
// samples, ranks, collective, runs and GPUs a thread; a record that cannot
// be read names its line.
func TestParseLogReadsBenchJSONRecords(t *testing.T) {
	const jsonl = `{"op":"allreduce","algo":"ring","topology":"switch:8","ranks":8,"dtype":"f32","redop":"sum","root":-1,"bytes":1024,"count":256,"time_us":10.5,"algbw_gbps":0.1,"busbw_gbps":0.2,"wrong":null,"gpus_per_thread":4,"iters":5}
{"op":"allreduce","algo":"ring","topology":"switch:8","ranks":8,"dtype":"f32","redop":"sum","root":-1,"bytes":8192,"count":2048,"time_us":20.25,"algbw_gbps":0.4,"busbw_gbps":0.7,"wrong":null,"gpus_per_thread":4,"iters":5}
`
	const csv = "op,algo,topology,ranks,dtype,redop,root,bytes,count,time_us,gpus_per_thread,iters\n" +
		"allreduce,ring,switch:8,8,f32,sum,-1,1024,256,10.5,4,5\n" +
		"allreduce,ring,switch:8,8,f32,sum,-1,8192,2048,20.25,4,5\n"
	fromJSON, err := ParseLog("bench.jsonl", []byte(jsonl))
	if err != nil {
		t.Fatal(err)
	}
	fromCSV, err := ParseLog("bench.csv", []byte(csv))
	if err != nil {
		t.Fatal(err)
	}
	for i := range fromCSV.Samples {
		fromCSV.Samples[i].Line-- // the CSV's header is a line the records have not
	}
	if fromJSON.Format != "commsim json lines" || fromJSON.Op != "allreduce" || fromJSON.Ranks != 8 || fromJSON.Iters != 5 || fromJSON.GPUsPerThread != 4 ||
		!reflect.DeepEqual(fromJSON.Samples, fromCSV.Samples) || len(fromJSON.Samples) != 2 {
		t.Errorf("JSON records %+v; want the CSV's %+v", fromJSON, fromCSV)
	}
	// A record of one run a size leaves iters out.
	one, err := ParseLog("one.jsonl", []byte(`{"op":"broadcast","ranks":4,"dtype":"f32","bytes":64,"time_us":3}`+"\n"))
	if err != nil || one.Iters != 1 || one.Op != "broadcast" {
		t.Errorf("one run a size: %+v, %v", one, err)
	}
	for _, tc := range []struct{ log, want string }{
		{jsonl + "{\"bytes\":16384,\n", "bench.jsonl:3: not one of commsim's JSON records"},
		{jsonl + `{"bytes":16384,"time_us":30} {"bytes":1}` + "\n", "bench.jsonl:3: more after the record: one JSON object a line"},
		{jsonl + `{"op":"allgather","bytes":16384,"time_us":30}` + "\n", "bench.jsonl:3: a second collective, allgather after allreduce"},
		{jsonl + `{"op":"allreduce","bytes":16384}` + "\n", "bench.jsonl:3: a record without bytes and time_us"},
		{jsonl + `{"op":"allreduce","bytes":16384,"time_us":-1}` + "\n", "bench.jsonl:3: want a size >= 0"},
		{jsonl + `{"op":"allreduce","algo":"rd","bytes":8192,"time_us":9}` + "\n", "bench.jsonl:3: 8192 bytes by rd after ring (commsim compare's rows?): give one algorithm's rows"},
	} {
		_, err := ParseLog("bench.jsonl", []byte(tc.log))
		var le *LogError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want a LogError saying %q", tc.log[len(jsonl):], err, tc.want)
		}
	}
	// nccl-tests' report on one line is no record.
	if isJSONLines([]byte(`{"version": 3, "results": [{"size": 8}], "bytes": 8, "time_us": 1}`)) {
		t.Error("a report with results read as a record")
	}
}
