package nccl_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

func TestFromEnvReadsWhatNCCLReads(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want nccl.Options
	}{
		{nil, nccl.Options{}},
		{map[string]string{"NCCL_PROTO": "simple"}, nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}}},
		{map[string]string{"NCCL_PROTO": "^LL128"}, nccl.Options{Protos: []ops.Protocol{ops.ProtoLL, ops.ProtoSimple}}},
		{map[string]string{"NCCL_ALGO": "Ring, Tree"}, nccl.Options{Algos: []nccl.Algo{nccl.Ring, nccl.Tree}}},
		{map[string]string{"NCCL_ALGO": "^nvls,nvlstree,collnet_direct,collnet_chain,pat"}, nccl.Options{Algos: []nccl.Algo{nccl.Tree, nccl.Ring}}},
		{map[string]string{"NCCL_BUFFSIZE": "8388608"}, nccl.Options{BuffSize: 8 << 20}},
		{map[string]string{"NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "16"}, nccl.Options{MinChannels: 16, MaxChannels: 16}},
		{map[string]string{"NCCL_MIN_NCHANNELS": "32"}, nccl.Options{MinChannels: 32}},
		{map[string]string{"NCCL_MAX_NCHANNELS": "4"}, nccl.Options{MaxChannels: 4}},
		{map[string]string{"NCCL_NCHANNELS_PER_NET_PEER": " 4"}, nccl.Options{NetPeerChannels: 4}},
		{map[string]string{"NCCL_P2P_PER_CHANNEL_NET_BW": "7"}, nccl.Options{P2PNetChannelGBps: 7}},
		{map[string]string{"NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_NVL_CHUNKSIZE": "0x40000", "NCCL_P2P_PCI_CHUNKSIZE": "65536"},
			nccl.Options{P2PNetChunk: 512 << 10, P2PNVLChunk: 256 << 10, P2PPCIChunk: 64 << 10}},
		{map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_COLLNET_ENABLE": "0"}, nccl.Options{NoNVLS: true, NoCollNet: true}},
		{map[string]string{"NCCL_NVLS_ENABLE": "2", "NCCL_COLLNET_ENABLE": "1", "NCCL_PAT_ENABLE": "2"}, nccl.Options{}},
		{map[string]string{"NCCL_PAT_ENABLE": "0"}, nccl.Options{NoPAT: true}},
		{map[string]string{"NCCL_PAT_ENABLE": "1"}, nccl.Options{ForcePAT: true}},
		{map[string]string{"NCCL_P2P_LL_THRESHOLD": "0"}, nccl.Options{NoP2PLL: true}},
		{map[string]string{"NCCL_P2P_LL_THRESHOLD": "65536"}, nccl.Options{P2PLLThreshold: 64 << 10}},
		{map[string]string{"NCCL_NVLS_NCHANNELS": "8", "NCCL_NVLS_CHUNKSIZE": "262144", "NCCL_NVLSTREE_MAX_CHUNKSIZE": "65536"},
			nccl.Options{NVLSChannels: 8, NVLSChunk: 256 << 10, NVLSTreeMaxChunk: 64 << 10}},
		{map[string]string{"NCCL_MIN_CTAS": "4", "NCCL_MAX_CTAS": "16", "NCCL_MIN_P2P_NCHANNELS": "2", "NCCL_MAX_P2P_NCHANNELS": "32"},
			nccl.Options{MinCTAs: 4, MaxCTAs: 16, MinP2PChannels: 2, MaxP2PChannels: 32}},
		{map[string]string{"NCCL_NTHREADS": "256", "NCCL_LL128_NTHREADS": "320", "NCCL_COLLNET_NODE_THRESHOLD": "4"},
			nccl.Options{Threads: 256, LL128Threads: 320, CollNetNodes: 4}},
		{map[string]string{"NCCL_PROTO": "^LL128;allreduce:LL128"}, nccl.Options{
			Protos: []ops.Protocol{ops.ProtoLL, ops.ProtoSimple}, OpProtos: map[ops.Op][]ops.Protocol{ops.AllReduce: {ops.ProtoLL128}}}},
		{map[string]string{"NCCL_ALGO": "ring,collnetdirect;AllReduce:tree,collnet_direct;broadcast:ring;"}, nccl.Options{
			Algos: []nccl.Algo{nccl.Ring, nccl.CollNetDirect}, OpAlgos: map[ops.Op][]nccl.Algo{ops.AllReduce: {nccl.Tree, nccl.CollNetDirect}, ops.Broadcast: {nccl.Ring}}}},
		{map[string]string{"NCCL_ALGO": "allgather:^pat"}, nccl.Options{
			OpAlgos: map[ops.Op][]nccl.Algo{ops.AllGather: {nccl.Tree, nccl.Ring, nccl.CollNetDirect, nccl.CollNetChain, nccl.NVLS, nccl.NVLSTree}}}},
	} {
		got, err := nccl.FromEnv(tc.env)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("FromEnv(%v) = %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}

func TestFromEnvRefusesWhatItWouldNotFollow(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so"}, "NCCL_TUNER_PLUGIN: not reproduced"},
		{map[string]string{"NCCL_PROTO": "LL256"}, `unknown protocol "LL256"`},
		{map[string]string{"NCCL_PROTO": "^LL,LL128,Simple"}, "leaves nothing"},
		{map[string]string{"NCCL_ALGO": ""}, "names nothing"},
		{map[string]string{"NCCL_ALGO": "hypercube"}, `unknown algorithm "hypercube"`},
		{map[string]string{"NCCL_BUFFSIZE": "8M"}, "NCCL_BUFFSIZE=8M: want 32768 to 1073741824 bytes, a whole number as NCCL reads one (decimal, or hexadecimal after 0x; no units)"},
		{map[string]string{"NCCL_BUFFSIZE": "4096"}, "want 32768 to"},
		{map[string]string{"NCCL_MIN_NCHANNELS": "65"}, "NCCL_MIN_NCHANNELS=65: want 1 to 64"},
		{map[string]string{"NCCL_MAX_NCHANNELS": "many"}, "NCCL_MAX_NCHANNELS=many: want 1 to 64"},
		{map[string]string{"NCCL_MIN_NCHANNELS": "0", "NCCL_MAX_NCHANNELS": "0"}, "want 1 to 64"},
		{map[string]string{"NCCL_NCHANNELS_PER_NET_PEER": "0"}, "NCCL_NCHANNELS_PER_NET_PEER=0: want 1 to 64"},
		{map[string]string{"NCCL_NCHANNELS_PER_NET_PEER": "two"}, "want 1 to 64"},
		{map[string]string{"NCCL_P2P_PER_CHANNEL_NET_BW": "0"}, "NCCL_P2P_PER_CHANNEL_NET_BW=0: want 1 to 10000 GB/s"},
		{map[string]string{"NCCL_P2P_NET_CHUNKSIZE": "512K"}, "NCCL_P2P_NET_CHUNKSIZE=512K: want 4096 to 134217728 bytes"},
		{map[string]string{"NCCL_P2P_NVL_CHUNKSIZE": "1024"}, "NCCL_P2P_NVL_CHUNKSIZE=1024: want 4096 to"},
		{map[string]string{"NCCL_NVLS_ENABLE": "3"}, "NCCL_NVLS_ENABLE=3: want 0, 1 or 2"},
		{map[string]string{"NCCL_COLLNET_ENABLE": "yes"}, "NCCL_COLLNET_ENABLE=yes: want 0 or 1"},
		{map[string]string{"NCCL_PAT_ENABLE": "on"}, "NCCL_PAT_ENABLE=on: want 0, 1 or 2"},
		{map[string]string{"NCCL_NTHREADS": "100"}, "NCCL_NTHREADS=100: want a multiple of 32 from 64 to 512 threads"},
		{map[string]string{"NCCL_LL128_NTHREADS": "1024"}, "NCCL_LL128_NTHREADS=1024: want a multiple of 32 from 160 to 640 threads"},
		{map[string]string{"NCCL_NVLS_NCHANNELS": "0"}, "NCCL_NVLS_NCHANNELS=0: want 1 to 64 channels"},
		{map[string]string{"NCCL_MAX_CTAS": "128"}, "NCCL_MAX_CTAS=128: want 1 to 64 channels"},
		{map[string]string{"NCCL_NVLS_CHUNKSIZE": "1k"}, "NCCL_NVLS_CHUNKSIZE=1k: want 4096 to"},
		{map[string]string{"NCCL_COLLNET_NODE_THRESHOLD": "-1"}, "NCCL_COLLNET_NODE_THRESHOLD=-1: want 1 to"},
		{map[string]string{"NCCL_P2P_LL_THRESHOLD": "-1"}, "NCCL_P2P_LL_THRESHOLD=-1: want 1 to 1073741824 bytes, or 0"},
		{map[string]string{"NCCL_ALGO": "allreduce:tree;ring"}, `"ring": every entry but the first names its collective`},
		{map[string]string{"NCCL_ALGO": "alltoall:ring"}, `unknown collective "alltoall"`},
		{map[string]string{"NCCL_PROTO": "allreduce:LL256"}, `allreduce: ops: unknown protocol "LL256"`},
	} {
		_, err := nccl.FromEnv(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromEnv(%v): %v; want an error saying %q", tc.env, err, tc.want)
		}
	}
}

// A collective's own entry in NCCL_ALGO or NCCL_PROTO replaces the list
// for every collective, for it alone.
func TestPerCollectiveListsChooseForTheirCollective(t *testing.T) {
	o, err := nccl.FromEnv(map[string]string{"NCCL_ALGO": "tree;allgather:ring;broadcast:ring", "NCCL_PROTO": "^LL;allgather:LL"})
	if err != nil {
		t.Fatal(err)
	}
	s := describe(t, "dgx-h100")
	for _, tc := range []struct {
		op    ops.Op
		algo  nccl.Algo
		proto ops.Protocol
	}{
		{ops.AllReduce, nccl.Tree, ops.ProtoSimple},
		{ops.AllGather, nccl.Ring, ops.ProtoLL},
		{ops.Broadcast, nccl.Ring, ops.ProtoSimple},
	} {
		c, err := nccl.Tune(s, tc.op, 1<<30, o)
		if err != nil || c.Algo != tc.algo || c.Protocol != tc.proto {
			t.Errorf("%s: %v, %v; want %v/%v", tc.op, c.Estimate, err, tc.algo, tc.proto)
		}
	}
	if c, err := nccl.Tune(s, ops.ReduceScatter, 1<<30, o); err == nil {
		t.Errorf("reduce-scatter runs no tree, yet NCCL_ALGO=tree chose %v", c.Estimate)
	}
}

// TestEnvWritesWhatFromEnvReads: Options.Env is the environment FromEnv
// reads back into the same options, one NAME=VALUE a variable set.
func TestEnvWritesWhatFromEnvReads(t *testing.T) {
	o := nccl.Options{BuffSize: 8 << 20, MinChannels: 4, MaxCTAs: 16, Threads: 256, LL128Threads: 320, NetPeerChannels: 2, P2PNetChannelGBps: 7,
		MinP2PChannels: 2, MaxP2PChannels: 8, P2PNetChunk: 256 << 10, NVLSChannels: 8, NVLSChunk: 64 << 10,
		NVLSTreeMaxChunk: 32 << 10, NoNVLS: true, NoCollNet: true, CollNetNodes: 3, NoPAT: true, NoP2PLL: true}
	for _, o := range []nccl.Options{o, {P2PLLThreshold: 4096, ForcePAT: true}} {
		lines := o.Env()
		env := map[string]string{}
		for _, l := range lines {
			name, value, _ := strings.Cut(l, "=")
			env[name] = value
		}
		if len(env) != len(lines) || len(lines) < 1 {
			t.Errorf("Env() = %q, want each variable once", lines)
		}
		if got, err := nccl.FromEnv(env); err != nil || !reflect.DeepEqual(got, o) {
			t.Errorf("FromEnv(%q) = %+v, %v; want %+v", lines, got, err, o)
		}
	}
	if l := o.Env(); len(l) != 18 || !slices.Contains(l, "NCCL_P2P_LL_THRESHOLD=0") {
		t.Errorf("Env() = %q, want 18 variables, NCCL_P2P_LL_THRESHOLD=0 among them", l)
	}
	if _, err := nccl.NewTuner(nil, nccl.Options{NoP2PLL: true, P2PLLThreshold: 4096}); err == nil || !strings.Contains(err.Error(), "NCCL_P2P_LL_THRESHOLD: both 4096 and 0") {
		t.Errorf("a threshold and no LL at once: %v", err)
	}
	if l := (nccl.Options{}).Env(); l != nil {
		t.Errorf("NCCL's defaults: Env() = %q, want none", l)
	}
}

// TestFromEnvNamesTheSameUnknownVariableEveryTime: of several variables
// commsim does not follow, the error names the first by name, not by
// the map's order, which changes from run to run.
func TestFromEnvNamesTheSameUnknownVariableEveryTime(t *testing.T) {
	env := map[string]string{"NCCL_TUNER_PLUGIN": "x", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO", "NCCL_ALGO": "ring"}
	for range 50 {
		if _, err := nccl.FromEnv(env); err == nil || !strings.HasPrefix(err.Error(), "nccl: NCCL_DEBUG: not reproduced") {
			t.Fatalf("err = %v, want NCCL_DEBUG, the first unknown by name", err)
		}
	}
}
