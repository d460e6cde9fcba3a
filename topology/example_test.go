package topology_test

import (
	"fmt"
	"os"

	"github.com/commsim/commsim/topology"
)

func ExampleParse() {
	t, err := topology.Parse("ring:4,bw=400Gb/s,lat=500ns")
	if err != nil {
		fmt.Println(err)
		return
	}
	l := t.Links[3]
	fmt.Println(t.NumGPUs(), "gpus,", len(t.Links), "links")
	fmt.Println(t.Nodes[l.A].Name, "-", t.Nodes[l.B].Name, topology.FormatBandwidth(l.BW), topology.FormatLatency(l.Latency))

	_, err = topology.Parse("ring:4,nicbw=50GB/s")
	fmt.Println(err)
	// Output:
	// 4 gpus, 4 links
	// gpu3 - gpu0 50GB/s 500ns
	// topology: spec "ring:4,nicbw=50GB/s": key "nicbw" does not apply to ring (ring takes bw, lat, reduce, arch, cpu)
}

func ExampleTopology_Route() {
	t, err := topology.Parse("dgx-h100x2")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, dst := range []int{1, 8} {
		p, err := t.RouteRanks(0, dst)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("rank 0 -> rank %d, %s:\n", dst, topology.FormatLatency(p.Latency))
		for _, e := range p.Edges {
			fmt.Printf("  edge %d %s %s\n", e, t.EdgeName(e), topology.FormatBandwidth(t.EdgeBW(e)))
		}
	}
	// Output:
	// rank 0 -> rank 1, 936.25ns:
	//   edge 0 gpu0->sw0 450GB/s
	//   edge 3 sw0->gpu1 450GB/s
	// rank 0 -> rank 8, 14us:
	//   edge 32 gpu0->nic0 64GB/s
	//   edge 64 nic0->netsw 50GB/s
	//   edge 81 netsw->nic8 50GB/s
	//   edge 49 nic8->gpu8 64GB/s
}

func ExampleTopology_WriteYAML() {
	t, _ := topology.Parse("switch:2,bw=450GB/s,lat=468.125ns,reduce=1.43TB/s")
	t.WriteYAML(os.Stdout)
	// Output:
	// name: switch:2,bw=450GB/s,lat=468.125ns,reduce=1.43TB/s
	// nodes:
	//   - {name: gpu0, kind: gpu, reduce: 1.43TB/s}
	//   - {name: gpu1, kind: gpu, reduce: 1.43TB/s}
	//   - {name: sw0, kind: switch}
	// links:
	//   - {a: gpu0, b: sw0, bw: 450GB/s, lat: 468.125ns}
	//   - {a: gpu1, b: sw0, bw: 450GB/s, lat: 468.125ns}
}

func ExampleParseBandwidth() {
	for _, s := range []string{"400Gb/s", "46.5GB/s", "1GiB/s", "inf"} {
		v, _ := topology.ParseBandwidth(s)
		fmt.Println(s, "=", v, "bytes/s =", topology.FormatBandwidth(v))
	}
	// Output:
	// 400Gb/s = 5e+10 bytes/s = 50GB/s
	// 46.5GB/s = 4.65e+10 bytes/s = 46.5GB/s
	// 1GiB/s = 1.073741824e+09 bytes/s = 1.073741824GB/s
	// inf = +Inf bytes/s = inf
}
