package ops

const pairwiseDoc = "TODO"

var pairwisePlans = map[Op]generator{}
