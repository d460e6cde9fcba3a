package nccl_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// FuzzFromEnv: no environment panics FromEnv or the tuner; one it
// accepts writes back (Options.Env) as the same numbers and switches, and
// the tuner given it chooses, or refuses with an error, for every
// collective on two nodes.
func FuzzFromEnv(f *testing.F) {
	f.Add("ring,tree", "^LL128", uint8(2), "8388608")
	f.Add("tree;allgather:ring", "LL;allreduce:Simple", uint8(6), "1")
	f.Add("^nvls", "", uint8(17), "0")
	f.Add("", "", uint8(23), "1")
	f.Add("pat", "simple", uint8(9), "0x10")
	tp, err := topology.Resolve("dgx-h100x2")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, algo, proto string, which uint8, value string) {
		env := map[string]string{nccl.EnvVars[int(which)%len(nccl.EnvVars)]: value}
		if algo != "" {
			env["NCCL_ALGO"] = algo
		}
		if proto != "" {
			env["NCCL_PROTO"] = proto
		}
		o, err := nccl.FromEnv(env)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("FromEnv(%q): an error of several lines: %v", env, err)
			}
			return
		}
		back := map[string]string{}
		for _, l := range o.Env() {
			name, v, _ := strings.Cut(l, "=")
			back[name] = v
		}
		want := o
		want.Algos, want.OpAlgos, want.Protos, want.OpProtos = nil, nil, nil, nil
		if got, err := nccl.FromEnv(back); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("FromEnv(%q) = %+v; written back as %q, read as %+v, %v", env, o, o.Env(), got, err)
		}
		tuner, err := nccl.NewTuner(tp, o)
		if err != nil {
			return
		}
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.Reduce, ops.AllToAll, ops.SendRecv} {
			for _, count := range []int{1, 1 << 20, 1 << 28} {
				if _, _, err := tuner.Plan(ops.Spec{Op: op, Ranks: 16, Count: count, DType: hw.F32, Redop: hw.Sum}); err != nil && strings.Contains(err.Error(), "\n") {
					t.Fatalf("%q: %v of %d: an error of several lines: %v", env, op, count, err)
				}
			}
		}
	})
}
