package calibrate_test

import (
	"fmt"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Fit a 4-GPU switch to an nccl-tests all-reduce log measured on links
// with twice the latency and half the bandwidth.
func Example() {
	const log = `# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    24.04    0.04    0.06      0    24.10    0.04    0.06      0
       16384          4096     float     sum      -1    24.61    0.67    1.00      0    24.70    0.66    1.00      0
      262144         65536     float     sum      -1    33.83    7.75   11.62      0    33.90    7.73   11.60      0
     4194304       1048576     float     sum      -1   181.29   23.14   34.70      0   181.50   23.11   34.66      0
`
	lg, err := calibrate.ParseLog("all_reduce.txt", []byte(log))
	if err != nil {
		panic(err)
	}
	topo, err := topology.Parse("switch:4,bw=80GB/s,lat=1us")
	if err != nil {
		panic(err)
	}
	p := calibrate.Problem{Topology: topo}
	for _, s := range lg.Samples {
		// nccl-tests' size of an all-reduce is each rank's buffer.
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: int(s.Bytes / 4), DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			panic(err)
		}
		p.Plans, p.MeasuredUS = append(p.Plans, plan), append(p.MeasuredUS, s.TimeUS)
	}
	fit, err := calibrate.Fit(p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d sizes of %s\n", lg.Format, len(lg.Samples), lg.Op)
	fmt.Printf("latency ×%.2f, bandwidth ×%.2f\n", fit.LatencyScale, fit.BandwidthScale)
	fmt.Printf("4 MiB: measured %.2f µs, fitted %.2f µs\n", p.MeasuredUS[3], fit.Seconds[3]*1e6)
	// Output:
	// nccl-tests table: 4 sizes of allreduce
	// latency ×2.00, bandwidth ×0.50
	// 4 MiB: measured 181.29 µs, fitted 181.29 µs
}

// Fit NCCL's machine to an all-gather on four GPUs, measured where the
// launch took 1.3× NCCL's base latency, each hop 0.8× its latency, and
// channels ran at 0.7× NCCL's speed with LL and 0.9× with Simple; then
// fit every other size and predict the rest.
func ExampleFitNCCL() {
	const log = `# Collective test starting: all_gather_perf
#       size        count     type  redop   root     time  algbw  busbw #wrong     time  algbw  busbw #wrong
        1024           64    float   none     -1    10.09   0.10   0.08      0    10.09   0.10   0.08      0
        4096          256    float   none     -1    10.31   0.40   0.30      0    10.31   0.40   0.30      0
       16384         1024    float   none     -1    11.19   1.46   1.10      0    11.19   1.46   1.10      0
       65536         4096    float   none     -1    12.36   5.30   3.98      0    12.36   5.30   3.98      0
      262144        16384    float   none     -1    19.38  13.53  10.14      0    19.38  13.53  10.14      0
     1048576        65536    float   none     -1    33.64  31.17  23.38      0    33.64  31.17  23.38      0
     4194304       262144    float   none     -1    77.33  54.24  40.68      0    77.33  54.24  40.68      0
    16777216      1048576    float   none     -1   252.10  66.55  49.91      0   252.10  66.55  49.91      0
    67108864      4194304    float   none     -1   951.15  70.56  52.92      0   951.15  70.56  52.92      0
`
	lg, err := calibrate.ParseLog("all_gather.txt", []byte(log))
	if err != nil {
		panic(err)
	}
	topo, err := topology.Resolve("switch:4")
	if err != nil {
		panic(err)
	}
	p := calibrate.NCCLProblem{Topology: topo}
	for _, s := range lg.Samples {
		// nccl-tests' size of an all-gather is the whole gathered buffer.
		spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllGather, Ranks: 4, DType: hw.F32, Redop: hw.Sum}, s.Bytes)
		p.Specs, p.MeasuredUS = append(p.Specs, spec), append(p.MeasuredUS, s.TimeUS)
	}
	fit, err := calibrate.FitNCCL(p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("fitted %v\n", fit.Params)
	m := fit.Machine
	fmt.Printf("launch ×%.1f, hop ×%.1f, LL ×%.1f, LL128 ×%.1f, Simple ×%.1f\n", m.Launch, m.Hop, m.Bandwidth[0], m.Bandwidth[1], m.Bandwidth[2])
	held, err := calibrate.FitNCCL(p.HoldOut())
	if err != nil {
		panic(err)
	}
	fmt.Printf("fitted on %d sizes, %d held out: median error under 1%%: %v\n", held.InSample.Sizes, held.HeldOut.Sizes, held.HeldOut.Median < 0.01)
	// Output:
	// fitted [launch hop LL bandwidth Simple bandwidth]
	// launch ×1.3, hop ×0.8, LL ×0.7, LL128 ×1.0, Simple ×0.9
	// fitted on 5 sizes, 4 held out: median error under 1%: true
}
