package ops

const rdDoc = "TODO"

var rdPlans = map[Op]generator{}
