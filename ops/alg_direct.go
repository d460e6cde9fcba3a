package ops

const directDoc = "TODO"

var directPlans = map[Op]generator{}
