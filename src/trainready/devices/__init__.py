"""Which local world to run on (one rank per GPU with NCCL, else gloo ranks on the CPU) and running one
function per GPU in parallel."""
