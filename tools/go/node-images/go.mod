module infercrane.local/tools/node-images

go 1.26.0
