#$ -pe smp 4
#$ -l h_rt=01:00:00
#$ -cwd
#$ -V
#$ -S /bin/bash
export OMP_NUM_THREADS=$NSLOTS
echo "threads $OMP_NUM_THREADS"
