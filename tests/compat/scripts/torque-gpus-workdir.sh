#PBS -q a30
#PBS -l nodes=1:ppn=1:gpus=1
#PBS -l walltime=40:00:00
#PBS -d /tmp
#PBS -o output.txt
#PBS -e error.txt

# gridsched corpus: replaced export CUDA_VISIBLE_DEVICES=$(cat $PBS_GPUFILE | sed s/.*-gpu// )
echo "gpus: $CUDA_VISIBLE_DEVICES"
# gridsched corpus: replaced python train.py
echo train
