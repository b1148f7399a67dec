#!/bin/bash -l

# Where output and errors go:
#SBATCH -o ./sim.out
#SBATCH -e ./sim.err
# Directory to start in:
#SBATCH -D ./
# Name:
#SBATCH -J test_sim_mpi
# Partition to use:
#SBATCH --partition=express
# Nodes, and MPI ranks on each:
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#
#SBATCH --mail-type=none
#SBATCH --mail-user=<userid>@example.org
#
# Time limit:
#SBATCH --time=00:10:00

#Start the simulation:
# gridsched corpus: replaced srun python3 sim_mpi.py > prog.out
echo "sim with $SLURM_NTASKS tasks"
