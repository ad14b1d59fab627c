// Package testpolicy writes the policy files tests load: version 1 of a
// policy that is a test fixture and inserts one step.
package testpolicy

// Insert is the text of a policy file holding version 1 of policy name, a
// test fixture (its assumption is "a test fixture", its evidence "none")
// whose one insert block, also called name, holds body: the block's
// attributes and blocks, each line indented as in the file.
//
//	testpolicy.Insert("mark", `    after  = "b"
//	    plugin = "../step.wasm"
//	    input  = { mode = "echo" }`)
func Insert(name, body string) string {
	return `
policy "` + name + `" {
  version    = 1
  assumption = "a test fixture"
  evidence {
    text = "none"
  }
  insert "` + name + `" {
` + body + `
  }
}
`
}
