# The site audit from the language reference, with every attribute spelled out.
task "site-audit" {
  objective   = "Audit every page"
  constraints = ["never edit pages", "report only"]

  variable "site" {
    type        = string
    description = "Base URL of the site"
  }
  variable "pages" {
    type    = list(string)
    default = ["a", "b"]
  }

  step "fetch" {
    plugin        = "../plugins/dummy.wasm"
    plugin_sha256 = "93A44BBB96C751218E4C00D479E4C14358122A389ACCA16205B1E4D0DC5F9476"
    input         = { site = var.site, id = task.id, pages = var.pages }
    timeout       = "30s"
    memory        = "128MiB"
    retry {
      attempts    = 3
      backoff     = "1s"
      max_backoff = "30s"
    }
  }

  step "check" {
    plugin      = "../plugins/dummy.wasm"
    for_each    = step.fetch.output.pages
    concurrency = 4
    input       = { url = "${var.site}/${each.value}", n = each.key }
  }

  step "verify" {
    plugin = "../plugins/dummy.wasm"
    input  = step.check.output
    repair {
      restart_from = "fetch"
      max          = 2
    }
  }
}
