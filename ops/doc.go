// Package ops will hold commsim's collective algorithms as plans, the one
// executor that runs any plan on any hw world, the α-β-γ cost model and
// parameter synchronisation. It imports hw only.
//
// Nothing is implemented here yet: the plans, executor and cost model are
// the subject of the next issue after the foundation.
package ops
