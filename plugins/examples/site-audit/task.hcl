# Audit a website of thousands of pages: read its sitemap, check every page
# (title, meta description, links, images), ask a person before generating
# title rewrites, and write the audit as a Markdown and a JSON report.
#
# From the module root:
#   make audit-demo              # 300 pages
#   make audit-demo PAGES=3000   # the whole site
# which builds the plugins and the site generator, starts the site on a free
# loopback port, runs this task with --var site=http://ADDRESS, approves the
# title rewrites from a second command, resumes, and compares the report's
# numbers with the site's /planted.json (demo.sh).

task "site-audit" {
  objective   = "Audit every page of the site in its sitemap and report what is wrong with it"
  constraints = [
    "never write to the site: only GET and HEAD requests",
    "check only links to the site's own pages",
    "generate title rewrites only once a person approved them",
  ]

  # The site's base URL: no default, since its port is picked when it starts.
  variable "site" {
    type = string
  }
  variable "site_name" {
    type    = string
    default = "Example Site"
  }

  # What status says the task has done: pages checked of the pages in the
  # sitemap, and each finding counter in words.
  progress {
    unit = "pages"
    step = "check"
    labels = {
      pages               = "pages checked"
      missing_title       = "pages without a title"
      missing_description = "pages without a meta description"
      duplicate_title     = "pages sharing their title"
      broken_links        = "broken links"
      images_without_alt  = "images without alt text"
    }
  }

  budget {
    wall_time = "2h"
  }

  step "sitemap" {
    plugin    = "sitemap.wasm"
    input     = { site = var.site }
    workspace = "none"
    http {
      allow   = ["127.0.0.1:*"]
      timeout = "10s"
    }
    retry {
      attempts = 3
      backoff  = "100ms"
    }
  }

  # One unit per page. A page that answers 500 fails its attempt, and the
  # retry fetches it again; counts and notes of a failed attempt are not
  # kept, so a retried page is counted once.
  step "check" {
    plugin      = "check.wasm"
    for_each    = step.sitemap.output.pages
    concurrency = 16
    input       = { url = each.value, site = var.site }
    workspace   = "none"
    http {
      allow     = ["127.0.0.1:*"]
      max_bytes = "1MiB"
      timeout   = "10s"
    }
    retry {
      attempts = 4
      backoff  = "100ms"
    }
  }

  step "suggest" {
    plugin    = "suggest.wasm"
    workspace = "none"
    input = {
      site_name = var.site_name
      pages     = [for p in step.check.output : { url = p.url, h1 = p.h1 } if p.missing_title]
    }
    approval {
      prompt = "Generate title rewrites for ${length([for p in step.check.output : p if p.missing_title])} pages?"
    }
  }

  step "report" {
    plugin    = "report.wasm"
    workspace = "none"
    input = {
      site        = var.site
      pages       = step.check.output
      suggestions = step.suggest.output.suggestions
    }
  }
}
