package ops

const treeDoc = "TODO"

var treePlans = map[Op]generator{}
