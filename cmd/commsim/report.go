package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// writeReport prints the sweep as a table, CSV or JSON Lines.
func writeReport(w io.Writer, s *sweep, rows []row) error {
	switch s.format {
	case "csv":
		return writeCSV(w, rows)
	case "json":
		return writeJSON(w, rows)
	}
	return writeTable(w, s, rows)
}

func fmtWrong(n int) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.Itoa(n)
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// cells are a row's columns in nccl-tests order: size, count, type, redop,
// root, then time, algbw, busbw and #wrong out of place and in place.
func cells(r row) []string {
	c := []string{strconv.FormatInt(r.bytes, 10), strconv.Itoa(r.count), r.dtype, r.redop, strconv.Itoa(r.root)}
	for _, res := range []result{r.outOfPlace, r.inPlace} {
		c = append(c, f2(res.timeUS), f2(res.algbw), f2(res.busbw), fmtWrong(res.wrong))
	}
	return c
}

var columns = []string{"size(B)", "count", "type", "redop", "root",
	"time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
	"in-place time(us)", "in-place algbw(GB/s)", "in-place busbw(GB/s)", "in-place #wrong"}

// writeMirrored says how many of the runs were timed on a mirror.
func writeMirrored(w io.Writer, mirrored, runs int) {
	if mirrored > 0 {
		fmt.Fprintf(w, "# %d of %d runs were timed by simulating only the ranks that stand for all (one on a switch, a node's on a cluster): every rank runs those plans alike on a fabric that looks alike from each, so the times are exact (--symmetry=false simulates every rank)\n", mirrored, runs)
	}
}

func writeTable(w io.Writer, s *sweep, rows []row) error {
	backend, times := s.backend.describe(s.timingOnly)
	fmt.Fprintf(w, "# commsim bench: %s on %s (%d ranks), backend %s, algorithm %s\n", s.op, s.topoName, s.topo.NumGPUs(), backend, s.algo)
	switch {
	case s.algo == "auto":
		fmt.Fprintf(w, "# auto picks the cheapest plan per size by the α-β-γ cost model of %s; its choice is the algo column\n", s.topo.Name)
	case s.algo == algoNCCL:
		fmt.Fprintf(w, "# nccl: NCCL %s's tuner on what it sees of %s (%s) picks algorithm/protocol/channels per size, simulated; its choice is the algo column, and where NCCL would run what commsim cannot simulate yet, the algo column names it after what ran\n",
			s.tuner.Options.Version, s.topo.Name, s.tuner.System)
	}
	fmt.Fprintf(w, "# %s; out-of-place then in-place\n", times)
	writeMirrored(w, s.mirrored, 2*len(rows))
	simHeader(w, rows)
	header := append(append([]string{}, columns...), simColumns(rows)...)
	if s.algo == "auto" || s.algo == algoNCCL {
		header = append(header, "algo")
	}
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header(header)
	sum := 0.0
	for _, r := range rows {
		c := append(cells(r), simCells(r)...)
		switch {
		case r.ncclChoice != "":
			c = append(c, r.algo+" (NCCL: "+r.ncclChoice+")")
		case s.algo == "auto" || s.algo == algoNCCL:
			c = append(c, r.algo)
		}
		if err := t.Append(c); err != nil {
			return err
		}
		sum += r.outOfPlace.busbw + r.inPlace.busbw
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(rows) > 0 {
		if wrong, checked := totalWrong(rows); checked {
			fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, map[bool]string{true: "OK", false: "FAILED"}[wrong == 0])
		}
		fmt.Fprintf(w, "# Avg bus bandwidth    : %s\n", strconv.FormatFloat(sum/float64(2*len(rows)), 'f', 3, 64))
	}
	return nil
}

func writeCSV(w io.Writer, rows []row) error {
	out := [][]string{append(append([]string{"op", "algo", "topology", "ranks"}, columns...), simColumns(rows)...)}
	for _, r := range rows {
		out = append(out, append(append([]string{r.op, r.algo, r.topology, strconv.Itoa(r.ranks)}, cells(r)...), simCells(r)...))
	}
	return writeCSVRows(w, out)
}

// jsonRecord holds the DESIGN contract's JSON fields of one measured run;
// bench and compare embed it in their records.
type jsonRecord struct {
	Op       string  `json:"op"`
	Algo     string  `json:"algo"`
	Topology string  `json:"topology"`
	Ranks    int     `json:"ranks"`
	DType    string  `json:"dtype"`
	Redop    string  `json:"redop"`
	Root     int     `json:"root"`
	Bytes    int64   `json:"bytes"`
	Count    int     `json:"count"`
	TimeUS   float64 `json:"time_us"`
	AlgBW    float64 `json:"algbw_gbps"`
	BusBW    float64 `json:"busbw_gbps"`
	Wrong    *int    `json:"wrong"`
}

// jsonRow is bench's JSON Lines record of one size: the out-of-place run,
// then the in-place one.
type jsonRow struct {
	jsonRecord
	InTimeUS float64 `json:"inplace_time_us"`
	InAlgBW  float64 `json:"inplace_algbw_gbps"`
	InBusBW  float64 `json:"inplace_busbw_gbps"`
	InWrong  *int    `json:"inplace_wrong"`
	// NCCLChoice is, with --algo nccl, what NCCL would run where commsim
	// cannot simulate it yet; Algo is what ran.
	NCCLChoice string `json:"nccl_choice,omitempty"`
	simJSON
}

func wrongPtr(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		o, i := r.outOfPlace, r.inPlace
		if err := enc.Encode(jsonRow{jsonRecord{r.op, r.algo, r.topology, r.ranks, r.dtype, r.redop, r.root, r.bytes, r.count,
			o.timeUS, o.algbw, o.busbw, wrongPtr(o.wrong)}, i.timeUS, i.algbw, i.busbw, wrongPtr(i.wrong), r.ncclChoice, simFields(r)}); err != nil {
			return err
		}
	}
	return nil
}

// writeCSVRows writes rows (the first one the header) as CSV.
func writeCSVRows(w io.Writer, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}
