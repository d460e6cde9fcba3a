package ops

const dbtreeDoc = "TODO"

var dbtreePlans = map[Op]generator{}
