package ops

const rhdDoc = "TODO"

var rhdPlans = map[Op]generator{}
