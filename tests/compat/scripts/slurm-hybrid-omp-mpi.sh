#!/bin/bash -l
#### Hybrid MPI and OpenMP job on a CPU partition
#SBATCH --account=project_465000123
#SBATCH --partition=debug
#SBATCH --time=00:05:00
#### Nodes (MPI ranks = nodes x tasks per node)
#SBATCH --nodes=1
#### MPI ranks on each node
#SBATCH --ntasks-per-node=4
#### OpenMP threads per rank (CPUs = nodes x tasks x cpus)
#SBATCH --cpus-per-task=4
##SBATCH --output=prog.out

export OMP_PROC_BIND=TRUE
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

echo "tasks=$SLURM_NTASKS threads=$OMP_NUM_THREADS"
# gridsched corpus: replaced time srun omp_mpi_2
srun echo rank
