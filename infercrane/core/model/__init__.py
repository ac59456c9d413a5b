"""What the stack configuration is: the frozen schema and its parts (pod, endpoints, engines, GPU, image, quantities) and the kinds and workload APIs they render to. Pure core."""
