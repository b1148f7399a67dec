#!/bin/bash
#$ -S /bin/bash
#$ -l arch=linux-x64    # architecture (needed)
#$ -l mem_free=1G       # memory, needed; it counts per slot
#$ -l h_rt=48:0:0
#$ -pe ompi 6           # parallel environment and slots (needed)
#$ -R yes               # reserve hosts for it (advised)
#$ -V                   # pass the environment (needed)
#$ -cwd                 # run in the submit directory
#$ -m bea
#$ -M someone@example.org

# gridsched corpus: replaced qstat -j $JOB_ID
echo "job $JOB_ID"

# gridsched corpus: replaced module load openmpi-1.6-nodlopen
echo module load

# The application
# gridsched corpus: replaced mpirun -np $NSLOTS python modeling.py &> modeling.out
echo "slots $NSLOTS"
