module github.com/lhengine/lhengine/plugins/sdk/go

go 1.22
