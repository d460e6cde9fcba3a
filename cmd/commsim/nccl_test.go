package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// --algo nccl runs what NCCL's tuner picks per size and says so in the
// algo column: ring with LL on one channel for 8 bytes on dgx-h100, NVLS
// for 16 MiB; and on eight nodes of one GPU, NCCL's PAT (Simple, the
// only protocol NCCL runs it with), which it simulates (no fallback to
// name).
func TestBenchAlgoNCCL(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "-b", "8", "-e", "1GiB", "-f", "128", "--timing-only")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(out, "# nccl: NCCL 2.30's tuner on what it sees of dgx-h100 (8 ranks on 1 node, hopper, 18 NVLinks (370.8 GB/s), NVLS, intel hosts)") {
		t.Errorf("no header naming NCCL's view:\n%s", out)
	}
	for _, want := range []string{"  ring/LL/1ch\n", "  nvls/Simple/16ch\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the algo column:\n%s", want, out)
		}
	}
	status, out, errOut = commsim("bench", "--topo", "cluster:8x1,arch=hopper", "--op", "allgather", "--algo", "nccl", "-b", "1MiB", "-e", "1MiB", "--timing-only")
	if status != 0 || !strings.Contains(out, "  pat/Simple/4ch\n") || strings.Contains(out, "(NCCL:") {
		t.Errorf("PAT: status %d %s:\n%s", status, errOut, out)
	}
	// JSON names NCCL's own choice apart only where it did not run.
	status, out, _ = commsim("bench", "--topo", "cluster:8x1,arch=hopper", "--op", "allgather", "--algo", "nccl", "-b", "1MiB", "-e", "1MiB", "--timing-only", "--format", "json")
	var rec struct {
		Algo       string  `json:"algo"`
		NCCLChoice string  `json:"nccl_choice"`
		TimeUS     float64 `json:"time_us"`
	}
	if err := json.Unmarshal([]byte(out), &rec); status != 0 || err != nil || rec.Algo != "pat/Simple/4ch" || rec.NCCLChoice != "" || !(rec.TimeUS > 0) {
		t.Errorf("json: status %d, %v: %s", status, err, out)
	}
	// A gather runs as NCCL's point-to-point, its root's receives all at
	// once, with data that checks.
	status, out, errOut = commsim("bench", "--topo", "cluster:2x4", "--op", "gather", "--root", "5", "--algo", "nccl", "-b", "8", "-e", "1MiB", "-f", "32", "--check")
	if status != 0 || !strings.Contains(out, "  p2p/") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("gather: status %d %s:\n%s", status, errOut, out)
	}
	// NCCL_PAT_ENABLE=1 runs PAT on nodes of several GPUs too, as NCCL
	// does, with data that checks.
	for _, op := range []string{"allgather", "reducescatter"} {
		status, out, errOut = commsim("bench", "--topo", "cluster:2x4", "--op", op, "--algo", "nccl", "--nccl-env", "NCCL_PAT_ENABLE=1", "--nccl-algo", "pat", "-b", "8", "-e", "1MiB", "-f", "32", "--check")
		if status != 0 || !strings.Contains(out, "  pat/Simple/") || !strings.Contains(out, "Out of bounds values : 0 OK") {
			t.Errorf("%s with NCCL_PAT_ENABLE=1: status %d %s:\n%s", op, status, errOut, out)
		}
	}
}

// On nodes of one GPU whose network switch reduces (sharp=), --algo
// nccl runs the CollNet chain NCCL picks for all-reduce (its model takes
// direct's bandwidth at 0.85 on Hopper), with data that checks; bench
// runs nccl-collnet-direct itself too.
func TestBenchAlgoNCCLRunsCollNet(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "cluster:8x1,arch=hopper,sharp=inf", "--algo", "nccl", "-b", "1KiB", "-e", "64KiB", "-f", "8", "--check")
	if status != 0 || strings.Count(out, "  collnet-chain/Simple/1ch\n") != 3 || strings.Contains(out, "(NCCL:") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("status %d %s:\n%s", status, errOut, out)
	}
	status, out, errOut = commsim("bench", "--topo", "cluster:4x1,rail=true,sharp=100GB/s", "--op", "reducescatter", "--algo", "nccl-collnet-direct", "-b", "8", "-e", "64KiB", "--check")
	if status != 0 || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("nccl-collnet-direct: status %d %s:\n%s", status, errOut, out)
	}
}

// On nodes of several GPUs whose NVSwitches and network switches reduce,
// --algo nccl runs NVLS across nodes over CollNet where NCCL picks it
// (on the communicator's 8 channels, NCCL_MAX_NCHANNELS's, fewer than
// NVLS's 16), and CollNet's all-reduces run themselves, with data that
// checks.
func TestBenchRunsCollNetOnNodesOfSeveralGPUs(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "dgx-h100x2,sharp=inf", "--algo", "nccl", "--nccl-env", "NCCL_MAX_NCHANNELS=8", "-b", "2MiB", "-e", "2MiB", "--check")
	if status != 0 || !strings.Contains(out, "  nvls/Simple/8ch\n") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("--algo nccl: status %d %s:\n%s", status, errOut, out)
	}
	for _, tc := range []struct{ algo, op string }{
		{"nccl-collnet-direct", "allreduce"}, {"nccl-collnet-direct", "allgather"}, {"nccl-collnet-direct", "reducescatter"},
		{"nccl-collnet-chain", "allreduce"},
		{"nccl-nvls", "allreduce"}, {"nccl-nvls", "allgather"}, {"nccl-nvls", "reducescatter"},
	} {
		status, out, errOut := commsim("bench", "--topo", "cluster:2x4,rail=true,sharp=100GB/s,nvls=inf", "--op", tc.op, "--algo", tc.algo, "-b", "8", "-e", "64KiB", "-f", "8", "--check")
		if status != 0 || !strings.Contains(out, "Out of bounds values : 0 OK") {
			t.Errorf("%s %s: status %d %s:\n%s", tc.algo, tc.op, status, errOut, out)
		}
	}
}

// NCCL_ALGO, NCCL_PROTO, channels and version have flags that change the
// choice; --nccl-env sets NCCL's variables by name.
func TestBenchNCCLFlagsForceAChoice(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topo", "dgx-a100", "--nccl-proto", "Simple"}, "  ring/Simple/1ch\n"},
		{[]string{"--nccl-algo", "ring", "--nccl-proto", "ll128,simple"}, "  ring/LL128/1ch\n"},
		{[]string{"--nccl-algo", "^tree,nvls,nvlstree,collnet_direct,collnet_chain,pat", "--nccl-proto", "^LL"}, "  ring/LL128/1ch\n"},
		{[]string{"--nccl-algo", "ring", "--nccl-channels", "4", "-b", "1MiB", "-e", "1MiB"}, "  ring/LL/4ch\n"},
		{[]string{"--topo", "dgx-a100x2", "--nccl-algo", "ring"}, "  ring/LL/1ch\n"},
		{[]string{"--topo", "dgx-a100x2", "--nccl-algo", "tree"}, "  tree/LL/1ch\n"},
		{[]string{"--op", "alltoall"}, "  p2p/LL/1ch\n"},
		{[]string{"--nccl-env", "NCCL_ALGO=ring,tree", "--nccl-env", "NCCL_PROTO=^LL", "-b", "1GiB", "-e", "1GiB"}, "  ring/Simple/24ch\n"},
		{[]string{"--nccl-env", "NCCL_NVLS_ENABLE=0", "-b", "1GiB", "-e", "1GiB"}, "  ring/Simple/24ch\n"},
		{[]string{"--nccl-env", "NCCL_NVLS_ENABLE=1", "-b", "1GiB", "-e", "1GiB"}, "  nvls/Simple/16ch\n"},
	} {
		args := append([]string{"bench", "--topo", "dgx-h100", "--algo", "nccl", "-b", "64", "-e", "64", "--timing-only"}, tc.args...)
		status, out, errOut := commsim(args...)
		if status != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: status %d %s, want %q in:\n%s", tc.args, status, errOut, tc.want, out)
		}
	}
	// A Simple buffer of 32 KiB (NCCL_BUFFSIZE) holds 8 steps of 4 KiB:
	// a chain's channel keeps at most 32 KiB in flight over a hop of
	// 3.4 µs, under 10 GB/s, where the default 4 MiB lets it run at the
	// link's pace.
	small := busbw(t, "--op", "broadcast", "--nccl-proto", "Simple", "--nccl-buffsize", "32KiB")
	normal := busbw(t, "--op", "broadcast", "--nccl-proto", "Simple")
	if !(small < normal/2) {
		t.Errorf("broadcast busbw: %v with a 32 KiB buffer, %v with 4 MiB; want the small buffer to throttle it", small, normal)
	}
	// 2.18's ring LL moved a third of the bus, where 2.30's moves half.
	old := busbw(t, "--nccl-version", "2.18", "--nccl-proto", "LL", "--topo", "dgx-a100")
	now := busbw(t, "--nccl-proto", "LL", "--topo", "dgx-a100")
	if !(old < now) {
		t.Errorf("ring/LL busbw: 2.18 %v, 2.30 %v; want 2.18 slower", old, now)
	}
	// A release with its build, as NCCL prints it, is that release.
	if built := busbw(t, "--nccl-version", "2.18.3-1+cuda12.2", "--nccl-proto", "LL", "--topo", "dgx-a100"); built != old {
		t.Errorf("ring/LL busbw: 2.18.3-1+cuda12.2 %v, 2.18 %v", built, old)
	}
	// The machine's channel rate bounds each of the B200 ring's 32
	// channels (22.5 GB/s in NCCL's model) to 10 GB/s.
	bounded := busbw(t, "--topo", "hgx-b200", "--op", "allgather", "--nccl-machine", "channel=10")
	free := busbw(t, "--topo", "hgx-b200", "--op", "allgather", "--nccl-machine", "channel=none")
	if !(bounded > 0.9*320 && bounded <= 320 && free > 2*bounded) {
		t.Errorf("allgather busbw %v with channels of 10 GB/s, %v with none; want about 32 x 10, and less than half", bounded, free)
	}
	if _, out, _ := commsim("bench", "--algo", "nccl", "--nccl-machine", "channel=10", "-e", "8", "--timing-only"); !strings.Contains(out, "\n# the machine departs from NCCL's model as --nccl-machine channel=10 says") {
		t.Errorf("bench does not say the machine given:\n%s", out)
	}
	// By default, as with channel=arch, a channel moves at most what
	// published runs measure on the fabric's GPUs (nccl.MeasuredChannel),
	// and bench says so: 22.3 GB/s on Blackwell, under the B200 ring
	// channel's 22.5; none on an A100.
	byDefault := busbw(t, "--topo", "hgx-b200", "--op", "allgather")
	arch := busbw(t, "--topo", "hgx-b200", "--op", "allgather", "--nccl-machine", "channel=arch")
	if given := busbw(t, "--topo", "hgx-b200", "--op", "allgather", "--nccl-machine", "channel=22.3"); arch != given || byDefault != given || !(arch < free) {
		t.Errorf("allgather busbw %v by default, %v with channel=arch, %v with channel=22.3, %v with none; want the first three equal, under the fourth", byDefault, arch, given, free)
	}
	const note = "\n# a channel moves at most "
	for _, tc := range []struct{ topo, machine, want string }{
		{"hgx-b200", "", note + "22.3 GB/s, what published runs measure on blackwell"},
		{"hgx-b200", "channel=arch", note + "22.3 GB/s"},
		{"dgx-h100", "launch=2", note + "20.3 GB/s, what published runs measure on hopper"},
		{"hgx-b200", "channel=none", ""},
		{"hgx-b200", "channel=20", ""},
		{"dgx-a100", "", ""},
		{"dgx-a100", "channel=arch", ""},
	} {
		args := []string{"bench", "--topo", tc.topo, "--algo", "nccl", "-e", "8", "--timing-only"}
		if tc.machine != "" {
			args = append(args, "--nccl-machine", tc.machine)
		}
		_, out, _ := commsim(args...)
		if got := strings.Contains(out, note); tc.want == "" && got || tc.want != "" && !strings.Contains(out, tc.want) {
			t.Errorf("%s, --nccl-machine %q: bench does not say %q, or says a rate where none applies:\n%s", tc.topo, tc.machine, tc.want, out)
		}
	}
}

func busbw(t *testing.T, args ...string) float64 {
	t.Helper()
	status, out, errOut := commsim(append([]string{"bench", "--algo", "nccl", "-b", "256MiB", "-e", "256MiB", "--timing-only", "--format", "json"}, args...)...)
	var rec struct {
		BusBW float64 `json:"busbw_gbps"`
	}
	if err := json.Unmarshal([]byte(out), &rec); status != 0 || err != nil {
		t.Fatalf("%v: status %d %s %v", args, status, errOut, err)
	}
	return rec.BusBW
}

// What NCCL cannot run, or commsim cannot simulate, is a usage error that
// says why, in one line and with no report begun on stdout.
func TestBenchNCCLRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		why  string
	}{
		{[]string{"--topo", "dgx-a100", "--nccl-algo", "nvls"}, "does not reduce"},
		{[]string{"--topo", "dgx-a100x2", "--nccl-algo", "collnet_direct"}, "SHARP"},
		{[]string{"--topo", "dgx-a100x2", "--nccl-algo", "pat", "--op", "allgather"}, "one GPU per node (NCCL_PAT_ENABLE=1 runs it on more)"},
		{[]string{"--topo", "dgx-a100x2", "--nccl-algo", "pat"}, "PAT runs all-gather and reduce-scatter only"},
		{[]string{"--nccl-algo", "bogus"}, "unknown algorithm"},
		{[]string{"--nccl-proto", "LL256"}, "unknown protocol"},
		{[]string{"--nccl-proto", "^LL,LL128,Simple"}, "--nccl-proto ^LL,LL128,Simple: leaves nothing"},
		{[]string{"--nccl-version", "2.9"}, "older than 2.18"},
		{[]string{"--nccl-version", "2.99"}, "--nccl-version 2.99: the model has NCCL 2.18 to 2.30's constants; give 2.30"},
		{[]string{"--nccl-version", "2.31.1"}, "--nccl-version 2.31.1: the model has NCCL 2.18 to 2.30's constants"},
		{[]string{"--nccl-version", "2.31+cuda13.0"}, "--nccl-version 2.31+cuda13.0: the model has NCCL 2.18 to 2.30's constants"},
		{[]string{"--nccl-channels", "-1"}, "--nccl-channels"},
		{[]string{"--nccl-net-peer-channels", "65"}, "--nccl-net-peer-channels 65: want 0 (NCCL's default) to 64"},
		{[]string{"--nccl-env", "NCCL_IB_HCA=mlx5"}, "--nccl-env: NCCL_IB_HCA: not reproduced"},
		{[]string{"--nccl-env", "NCCL_NVLS_ENABLE"}, `--nccl-env "NCCL_NVLS_ENABLE": want NAME=VALUE`},
		{[]string{"--nccl-env", "NCCL_NVLS_ENABLE=0", "--nccl-env", "NCCL_NVLS_ENABLE=1"}, "--nccl-env: NCCL_NVLS_ENABLE given twice"},
		{[]string{"--nccl-env", "NCCL_BUFFSIZE=8388608", "--nccl-buffsize", "8MiB"}, "--nccl-buffsize and --nccl-env NCCL_BUFFSIZE both set it"},
		{[]string{"--nccl-env", "NCCL_MAX_NCHANNELS=4", "--nccl-env", "NCCL_MIN_NCHANNELS=4", "--nccl-channels", "4"}, "--nccl-channels and --nccl-env NCCL_MIN_NCHANNELS both set it"},
		{[]string{"--nccl-env", "NCCL_COLLNET_ENABLE=2"}, "--nccl-env: NCCL_COLLNET_ENABLE=2: want 0 or 1"},
		{[]string{"--nccl-buffsize", "1KiB"}, "--nccl-buffsize 1KiB: want 32KiB to 1GiB"},
		{[]string{"--nccl-buffsize", "lots"}, "--nccl-buffsize"},
		{[]string{"--op", "barrier"}, "--algo nccl plans"},
	} {
		args := append([]string{"bench", "--topo", "dgx-h100", "--algo", "nccl", "-b", "1MiB", "-e", "1MiB", "--timing-only"}, tc.args...)
		status, out, errOut := commsim(args...)
		if status != 2 || !strings.Contains(errOut, tc.why) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: status %d, stderr %q; want 2 and one line saying %q", tc.args, status, errOut, tc.why)
		}
		if out != "" {
			t.Errorf("%v: refused, yet wrote %q", tc.args, out)
		}
	}
	status, _, errOut := commsim("bench", "--topo", "dgx-a100", "--algo", "nccl-nvls", "-e", "8", "--timing-only")
	if status != 2 || !strings.Contains(errOut, "needs GPUs on a switch that reduces") {
		t.Errorf("nccl-nvls on dgx-a100: status %d, %q", status, errOut)
	}
	for _, tc := range []struct{ algo, topo, why string }{
		{"nccl-collnet-direct", "dgx-a100x2", "needs nodes joined by network switches that reduce (SHARP)"},
		{"nccl-nvls", "cluster:2x4,nvls=inf", "across nodes only over network switches that reduce"},
		{"nccl-nvlstree", "dgx-h100", "algorithm nccl-nvlstree needs several nodes (NCCL runs NVLS tree only across them; on one node, nccl-nvls), which dgx-h100 does not have"},
		// The fabric's own fault, not NVLS's: its nodes differ.
		{"nccl-nvls", "dgx-h100x2 -g 12", "algorithm nccl-nvls on dgx-h100x2 (first 12 GPUs): nccl: node 1 has 4 GPUs and node 0 8"},
	} {
		args := append([]string{"bench", "--algo", tc.algo, "-e", "8", "--timing-only", "--topo"}, strings.Fields(tc.topo)...)
		status, _, errOut = commsim(args...)
		if status != 2 || !strings.Contains(errOut, tc.why) {
			t.Errorf("%s on %s: status %d, %q; want 2 saying %q", tc.algo, tc.topo, status, errOut, tc.why)
		}
	}
	for _, topo := range []string{"dgx-h100", "dgx-a100x2"} {
		status, _, errOut = commsim("bench", "--topo", topo, "--op", "allgather", "--algo", "nccl-pat", "-e", "8", "--timing-only")
		if status != 2 || !strings.Contains(errOut, "needs one GPU per node") {
			t.Errorf("nccl-pat on %s: status %d, %q", topo, status, errOut)
		}
	}
	for _, flag := range [][]string{{"--nccl-proto", "LL"}, {"--nccl-version", "2.30"}, {"--nccl-env", "NCCL_NVLS_ENABLE=0"}} {
		status, _, errOut = commsim(append([]string{"bench", "--topo", "dgx-h100", "-e", "8"}, flag...)...)
		if status != 2 || !strings.Contains(errOut, "go with --algo nccl") {
			t.Errorf("%s without --algo nccl: status %d, %q", flag[0], status, errOut)
		}
	}
}

// The flags optionFlags writes (calibrate's command to predict with a
// fit) set the environment they were written from again.
func TestOptionFlagsRepeatTheEnvironment(t *testing.T) {
	for _, o := range []nccl.Options{
		{},
		{Version: nccl.V2_27, Algos: []nccl.Algo{nccl.Ring, nccl.CollNetDirect}, Protos: []ops.Protocol{ops.ProtoLL, ops.ProtoSimple}},
		{Channels: 8, BuffSize: 8 << 20, NetPeerChannels: 2},
		{MinChannels: 32, MaxChannels: 48},
		{P2PNetChunk: 512 << 10, P2PNVLChunk: 256 << 10, P2PPCIChunk: 64 << 10, NoNVLS: true, NoCollNet: true},
		{NVLSChannels: 8, NVLSChunk: 64 << 10, NVLSTreeMaxChunk: 32 << 10, MinCTAs: 2, MaxCTAs: 16, MinP2PChannels: 2,
			MaxP2PChannels: 8, Threads: 256, LL128Threads: 320, NoPAT: true, CollNetNodes: 3},
		{OpAlgos: map[ops.Op][]nccl.Algo{ops.AllReduce: {nccl.Tree}}, Protos: []ops.Protocol{ops.ProtoSimple},
			OpProtos: map[ops.Op][]ops.Protocol{ops.AllGather: {ops.ProtoLL}, ops.Broadcast: {ops.ProtoLL128, ops.ProtoSimple}}},
	} {
		var f ncclFlags
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fl)
		line := optionFlags(o)
		if err := fl.Parse(shellWords(line)); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got, err := f.options()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if o.Version == 0 {
			o.Version = nccl.V2_30
		}
		if !reflect.DeepEqual(got, o) {
			t.Errorf("%q sets %+v, want %+v", line, got, o)
		}
	}
}

// shellWords splits a command line as a shell would one whose only
// quotes are single.
func shellWords(line string) []string {
	var words []string
	for i, part := range strings.Split(line, "'") {
		if i%2 == 1 {
			words = append(words, part)
			continue
		}
		words = append(words, strings.Fields(part)...)
	}
	return words
}
