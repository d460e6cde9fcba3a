package main

import (
	"encoding/json"
	"io"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/commsim/commsim/topology"
)

// newTopoPresetsCmd lists the presets, so that a user need not provoke an
// error to learn their names.
func newTopoPresetsCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "presets",
		Short: "List the built-in fabrics (presets) that --topo takes, with what each is",
		Long: `presets lists the fabrics --topo takes by name: N stands for a count
(dgx-h100x4 is four DGX H100 nodes, mac-tb5:3 three Macs). A multi-node
preset takes the cluster spec's keys too (dgx-h100x4,rail=true,nicbw=200Gb/s),
and the NVSwitch presets gpus=N, the GPUs a job runs on in each node
(dgx-h100x10,gpus=1: ten nodes, one rank each, as srun --ntasks-per-node=1).
commsim topo show NAME prints a preset's devices, links and the source of
every number.`,
		Example: `  commsim topo presets
  commsim topo presets --format json
  commsim topo show gb200-nvl72x2
  commsim topo show dgx-h100x10,gpus=1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := reportFormat(format, "table", "json")
			if err != nil {
				return err
			}
			return writePresets(cmd.OutOrStdout(), topology.Presets(), format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output: table|json (JSON Lines, one preset a line)")
	return cmd
}

// presetLine is one preset as JSON Lines carry it.
type presetLine struct {
	Name    string   `json:"name"`
	Summary string   `json:"summary"`
	Sources []string `json:"sources"`
}

func writePresets(w io.Writer, presets []topology.Preset, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		for _, p := range presets {
			if err := enc.Encode(presetLine{p.Name, p.Summary, p.Sources}); err != nil {
				return err
			}
		}
		return nil
	}
	tbl := tablewriter.NewWriter(w)
	tbl.Header("preset", "fabric")
	for _, p := range presets {
		if err := tbl.Append(p.Name, p.Summary); err != nil {
			return err
		}
	}
	return tbl.Render()
}
